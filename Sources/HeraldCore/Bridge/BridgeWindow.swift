// The bridge's window of publishes in flight: which Herald cursor may be acked once a broker has stored what came before.
import DequeModule

/// A delivery's place in Herald's stream: its partition (nil when the line carried none, as from a
/// server without partitions) and its cursor. Its broker message id is `"<partition>:<cursor>"`
/// (partition 0 when absent), so a re-publish of the same delivery is the same message.
public struct DeliveryPosition: Hashable, Sendable, CustomStringConvertible {
    public var partition: Int64?
    public var cursor: Int64
    public init(partition: Int64?, cursor: Int64) { self.partition = partition; self.cursor = cursor }
    /// The broker's deduplication id.
    public var messageID: String { "\(partition ?? 0):\(cursor)" }
    public var description: String { messageID }

    /// Reads a message id back (`"p:c"`); nil for anything else.
    public init?(messageID: String) {
        var partition: Int64 = 0, cursor: Int64 = 0, inCursor = false, digits = 0
        for byte in messageID.utf8 {
            if byte == UInt8(ascii: ":") {
                guard !inCursor, digits > 0 else { return nil }
                inCursor = true; digits = 0
                continue
            }
            guard byte >= 0x30, byte <= 0x39, digits < 18 else { return nil }
            if inCursor { cursor = cursor * 10 + Int64(byte - 0x30) } else { partition = partition * 10 + Int64(byte - 0x30) }
            digits += 1
        }
        guard inCursor, digits > 0 else { return nil }
        self.init(partition: partition, cursor: cursor)
    }
}

/// The bridge's publishes in flight, as a state machine: each delivery read from Herald is either
/// published (at most `capacity` unanswered at once) or, when the broker already holds it, passed
/// over; a partition's acknowledgeable cursor moves only over a prefix of its deliveries that the
/// broker has confirmed, so Herald's cursor never passes a delivery the broker could still lose.
/// A failed publish ends the session: the caller starts again from Herald's acknowledged cursor and
/// the broker's deduplication drops what it already stored.
public struct BridgeWindow: Sendable {
    public enum Action: Equatable, Sendable {
        /// Publish this delivery now.
        case publish(DeliveryPosition)
        /// The broker holds it already (it stored everything up to it before this session): not published.
        case passOver(DeliveryPosition)
    }

    /// The most publishes unanswered at once.
    public let capacity: Int
    /// Per partition key (`partition ?? -1`), its deliveries in cursor order not yet acknowledgeable: cursor and whether confirmed.
    private var waiting: [Int64: Deque<(cursor: Int64, confirmed: Bool)>] = [:]
    /// Per partition key: the highest cursor whose deliveries are all confirmed, not yet handed to `takeAcks`.
    private var ackable: [Int64: DeliveryPosition] = [:]
    /// Per broker partition (`partition ?? 0`): the broker already stores every delivery up to this cursor.
    private var storedThrough: [Int64: Int64]
    /// Publishes sent and not answered.
    public private(set) var inFlight = 0

    /// `storedThrough`: what the broker already holds per partition (from its newest message at the
    /// start of a session; deliveries come in cursor order, so it holds every one before it too).
    public init(capacity: Int, storedThrough: [Int64: Int64] = [:]) {
        precondition(capacity > 0)
        self.capacity = capacity
        self.storedThrough = storedThrough
    }

    /// Whether another delivery may be read from Herald.
    public var hasRoom: Bool { inFlight < capacity }

    private static func key(_ p: DeliveryPosition) -> Int64 { p.partition ?? -1 }

    /// A delivery line arrived from Herald.
    public mutating func deliveryReceived(_ position: DeliveryPosition) -> Action {
        let key = Self.key(position)
        if let stored = storedThrough[position.partition ?? 0], position.cursor <= stored {
            // Confirmed already; acknowledgeable once the deliveries before it are.
            waiting[key, default: []].append((position.cursor, true))
            advance(key, partition: position.partition)
            return .passOver(position)
        }
        waiting[key, default: []].append((position.cursor, false))
        inFlight += 1
        return .publish(position)
    }

    /// The broker confirmed it stored (or already had) the delivery's message.
    public mutating func publishConfirmed(_ position: DeliveryPosition) {
        let key = Self.key(position)
        guard var queue = waiting[key] else { return }
        // Confirmations come nearly in order: search from the front.
        guard let i = queue.firstIndex(where: { $0.cursor == position.cursor && !$0.confirmed }) else { return }
        queue[i].confirmed = true
        waiting[key] = queue
        inFlight -= 1
        advance(key, partition: position.partition)
    }

    private mutating func advance(_ key: Int64, partition: Int64?) {
        guard var queue = waiting[key] else { return }
        var through: Int64?
        while let first = queue.first, first.confirmed {
            through = first.cursor
            queue.removeFirst()
        }
        waiting[key] = queue
        if let through { ackable[key] = DeliveryPosition(partition: partition, cursor: through) }
    }

    /// The cursors Herald may now be told (one per partition, the highest), handed over once.
    public mutating func takeAcks() -> [DeliveryPosition] {
        guard !ackable.isEmpty else { return [] }
        defer { ackable.removeAll(keepingCapacity: true) }
        return ackable.values.sorted { ($0.partition ?? -1) < ($1.partition ?? -1) }
    }

    /// Whether there is an acknowledgeable cursor not yet taken.
    public var hasAcks: Bool { !ackable.isEmpty }
}
