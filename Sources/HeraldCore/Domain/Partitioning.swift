// Which partition a user's events live in (SPEC §9): FNV-1a 64 of the user id's UTF-8 bytes, mod P.

/// A database's partitioning: P partitions, fixed when the database is created. Users are
/// independent, so each user's events, deliveries, timers and idempotency keys live in one
/// partition, and each partition's log replays alone.
public struct Partitioning: Sendable, Equatable {
    /// P: 1 … 1024.
    public let count: Int
    /// The hash's name, as `hello` publishes it so that clients can route.
    public static let hashName = "fnv1a64"
    public static let maximumCount = 1024

    public init(count: Int) {
        precondition(count >= 1 && count <= Self.maximumCount, "partitions must be 1 … \(Self.maximumCount)")
        self.count = count
    }

    /// One partition: today's single log.
    public static let single = Partitioning(count: 1)

    /// The user's partition.
    @inlinable
    public func partition(of user: String) -> Int {
        count == 1 ? 0 : Int(Self.fnv1a64(user) % UInt64(count))
    }

    /// FNV-1a, 64-bit (offset basis 0xcbf29ce484222325, prime 0x100000001b3) of the UTF-8 bytes.
    @inlinable
    public static func fnv1a64(_ text: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01b3
        }
        return hash
    }

    /// Every partition, in order.
    public var all: Range<Int> { 0..<count }
}
