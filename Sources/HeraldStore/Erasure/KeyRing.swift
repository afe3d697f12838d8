// The content keys in memory, by user and generation: what readers open sealed bodies with.
import HeraldCore

/// Every key of `user_keys`, or those of some users: loaded once, read many times. A reader that
/// meets a body sealed under a generation it does not hold sees the body's erased form.
public final class KeyRing: @unchecked Sendable {
    private var keys: [String: [ContentKey]] = [:]

    public init() {}

    /// Every key stored.
    public static func load(_ connection: PGConnection) throws(StoreError) -> KeyRing {
        let ring = KeyRing()
        try ring.read(connection.execute("SELECT user_id, generation, key FROM user_keys ORDER BY user_id, generation"))
        return ring
    }

    /// The keys of one user.
    public static func load(_ connection: PGConnection, user: String) throws(StoreError) -> KeyRing {
        let ring = KeyRing()
        try ring.read(connection.execute("SELECT user_id, generation, key FROM user_keys WHERE user_id = $1 ORDER BY generation", [user]))
        return ring
    }

    private func read(_ r: PGResult) {
        for i in 0..<r.rowCount {
            guard let user = r.string(i, 0), let generation = r.int64(i, 1), let hex = r.string(i, 2),
                  let bytes = UserKeyStore.bytes(fromHex: hex) else { continue }
            add(user: user, ContentKey(generation: generation, bytes: bytes))
        }
    }

    public func add(user: String, _ key: ContentKey) {
        keys[user, default: []].append(key)
    }

    /// Forgets the user's keys of `generation` and below.
    public func remove(user: String, through generation: Int64) {
        keys[user]?.removeAll { $0.generation <= generation }
        if keys[user]?.isEmpty == true { keys[user] = nil }
    }

    /// The user's key of `generation`'s bytes.
    public func key(user: String, generation: Int64) -> [UInt8]? {
        keys[user]?.last(where: { $0.generation == generation })?.bytes
    }

    /// The user's newest key.
    public func newest(user: String) -> ContentKey? { keys[user]?.last }

    /// How many users have a key.
    public var userCount: Int { keys.count }

    /// `body` as a reader uses it: opened, erased, or as stored when not sealed.
    public func readable(_ body: [UInt8], user: String?) -> [UInt8] {
        guard let user else { return body }
        return ContentSeal.readable(body) { self.key(user: user, generation: $0) }
    }

    /// `ContentSeal.open` with this ring's keys of `user`.
    public func open(_ body: UnsafeRawBufferPointer, user: String?) -> ContentSeal.Opened {
        guard let user else { return .clear }
        return ContentSeal.open(body) { self.key(user: user, generation: $0) }
    }
}
