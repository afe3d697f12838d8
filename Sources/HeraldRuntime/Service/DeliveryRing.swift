// The committed deliveries kept in memory for consumers, and the delivery head.
import DequeModule

/// What a consumer filter reads of a delivery (`ConsumerFilter.matches`), kept beside its body.
struct DeliveryTag {
    /// `ConsumerFilter.kindCode(of:)` of its kind.
    var kindCode: UInt8
    var app: String?
}

/// The most recent committed deliveries' stored bodies (the very arrays of their rows, shared,
/// not copied), bounded in count and bytes, by cursor; and the newest committed cursor (the
/// head). A consumer close to the head is streamed from here (`HeraldService.pump` writes each
/// wire line into its batch, so a delivery costs no line array of its own); one further behind
/// reads from PostgreSQL. Only a cache: a gap restarts it, and the table has every row.
struct DeliveryRing {
    /// The bodies, oldest first: index `i` is cursor `firstCursor + i`.
    private(set) var bodies: Deque<[UInt8]> = []
    /// Each body's kind and app, for filtered consumers: `tags[i]` is `bodies[i]`'s.
    private(set) var tags: Deque<DeliveryTag> = []
    /// The cursor of `bodies.first` (or of the next body to come, while empty).
    private(set) var firstCursor: Int64 = 1
    /// The bytes of `bodies` (bounded by `maxBytes`).
    private(set) var bytes = 0
    /// The newest committed delivery's cursor (0: none yet).
    private(set) var head: Int64 = 0
    /// The most bodies kept (`ServiceConfiguration.deliveryRingCapacity`).
    let capacity: Int
    /// The most bytes kept, though never fewer than one body (`ServiceConfiguration.deliveryRingBytes`).
    let maxBytes: Int

    init(capacity: Int, maxBytes: Int) {
        self.capacity = capacity
        self.maxBytes = maxBytes
    }

    /// How many bodies are kept: cursors `firstCursor ..< firstCursor + count`.
    var count: Int { bodies.count }
    var isEmpty: Bool { bodies.isEmpty }

    /// Start-up: the head read from PostgreSQL; the ring starts empty after it.
    mutating func restored(head: Int64) {
        self.head = head
        firstCursor = head + 1
    }

    /// A delivery committed at `cursor`: kept, the oldest dropped past the bounds, the head moved.
    mutating func committed(_ body: [UInt8], tag: DeliveryTag = DeliveryTag(kindCode: 0, app: nil), cursor: Int64) {
        if bodies.isEmpty { firstCursor = cursor }
        if cursor != firstCursor + Int64(bodies.count) {
            // Another writer took cursors in between: restart here (consumers read the gap from PostgreSQL).
            bodies.removeAll()
            tags.removeAll()
            bytes = 0
            firstCursor = cursor
        }
        bodies.append(body)
        tags.append(tag)
        bytes += body.count
        while bodies.count > capacity || (bytes > maxBytes && bodies.count > 1) {
            bytes -= bodies.removeFirst().count
            tags.removeFirst()
            firstCursor += 1
        }
        head = max(head, cursor)
    }

    /// Deliveries up to `newHead` committed without this process learning their cursors: the head
    /// moves there, and the ring, which holds no line past its end, starts after it — every
    /// consumer reads the rows it lacks from the table. False (nothing changed) unless it moves forward.
    mutating func headFoundAhead(_ newHead: Int64) -> Bool {
        guard newHead > head else { return false }
        head = newHead
        bodies.removeAll()
        tags.removeAll()
        bytes = 0
        firstCursor = newHead + 1
        return true
    }
}
