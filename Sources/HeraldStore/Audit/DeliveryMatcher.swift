// Pairs each derived delivery with the stored one of the same (user, ordinal) as both streams go by.
import HeraldCore
#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif

/// Compares derived and stored deliveries byte for byte without holding either side whole: an
/// entry waits only until its counterpart arrives (a few events later, or — for a timer — when
/// the replay fires it). What is left at the end has no counterpart.
///
/// Whichever side of a pair arrives first waits as a byte range in that side's queue (a derived
/// delivery encoded into an arena, a stored one copied into another): both sides follow the log,
/// so the twin of an arrival is almost always the other queue's first entry — compared with
/// `memcmp`, no hashing, no copy of the `Delivery` value. (A stored delivery comes before its
/// twin when it sorts before its causing event in the merged COPY, where the two tie on
/// position: about 40% of them on the bench log.) Anything out of order moves to keyed tables,
/// as owned bytes.
struct DeliveryMatcher {
    /// A delivery's identity: its user and its ordinal in that user's stream.
    struct Key: Hashable {
        var user: String
        var index: Int64
    }

    /// What a what-if report groups by: the decision, not its bytes.
    typealias Decision = (notification: String?, at: Instant, app: String?, kind: String, reason: String)

    /// One side's deliveries waiting for their twins, in arrival order: entry `i`'s bytes are
    /// `arena[start..<end]`.
    struct Queue {
        /// A struct, not a tuple: an array of tuples was destroyed through the runtime's generic
        /// tuple witness on every `clear()`.
        struct Entry {
            var key: Key
            var start: Int
            var end: Int
            var notification: String?
        }
        var entries: [Entry] = []
        var head = 0
        var arena: ByteSink

        init(arenaCapacity: Int = 1 << 16) { arena = ByteSink(capacity: arenaCapacity) }

        var isEmpty: Bool { head == entries.count }
        var first: Entry { entries[head] }
        func bytes(start: Int, end: Int) -> UnsafeRawBufferPointer {
            UnsafeRawBufferPointer(start: arena.base + start, count: end - start)
        }
        mutating func push(_ key: Key, from start: Int, notification: String?) {
            entries.append(Entry(key: key, start: start, end: arena.count, notification: notification))
        }
        mutating func popFirst() {
            head += 1
            if head == entries.count { clear() }
        }
        mutating func clear() {
            entries.removeAll(keepingCapacity: true)
            head = 0
            arena.removeAll()
        }
        /// Moves every waiting entry into `table`, as owned bytes.
        mutating func spill(into table: inout [Key: (body: [UInt8], notification: String?)]) {
            guard !isEmpty else { return }
            for e in entries[head...] { table[e.key] = (Array(bytes(start: e.start, end: e.end)), e.notification) }
            clear()
        }
    }

    private var derivedWaiting: [Key: (body: [UInt8], notification: String?)] = [:]
    private var storedWaiting: [Key: (body: [UInt8], notification: String?)] = [:]
    private var derivedQueue = Queue()
    private var storedQueue = Queue()
    private(set) var compared = 0
    private(set) var differences: [Replayer.Difference] = []

    /// Kept only under a what-if, which lists changed decisions per subject.
    let recordsDecisions: Bool
    private(set) var storedDecisions: [String: [Int64: Decision]] = [:]
    private(set) var derivedDecisions: [String: [Int64: Decision]] = [:]

    init(recordsDecisions: Bool) {
        self.recordsDecisions = recordsDecisions
    }

    /// A delivery the replay derived, the `index`-th of its user. By pointer, read in place: passed
    /// by value from the outcome's buffer it was copied first (retaining its nine references).
    mutating func derived(_ d: UnsafePointer<Delivery>, index: Int64) {
        let key = Key(user: d.pointee.user, index: index)
        if recordsDecisions {
            derivedDecisions[d.pointee.user, default: [:]][index] = (d.pointee.notificationId, d.pointee.at, d.pointee.app, d.pointee.kind.rawValue, d.pointee.reason)
        }
        let start = derivedQueue.arena.count
        d.pointee.writeBody(to: &derivedQueue.arena)
        let derived = derivedQueue.bytes(start: start, end: derivedQueue.arena.count)
        if !storedQueue.isEmpty {
            let twin = storedQueue.first
            if twin.key == key {
                compare(key, derived: derived, stored: storedQueue.bytes(start: twin.start, end: twin.end),
                        notification: twin.notification ?? d.pointee.notificationId)
                storedQueue.popFirst()
                derivedQueue.arena.truncate(to: start)
                return
            }
            storedQueue.spill(into: &storedWaiting)
        }
        if !storedWaiting.isEmpty, let stored = storedWaiting.removeValue(forKey: key) {
            stored.body.withUnsafeBytes { compare(key, derived: derived, stored: $0, notification: stored.notification ?? d.pointee.notificationId) }
            derivedQueue.arena.truncate(to: start)
        } else {
            derivedQueue.push(key, from: start, notification: d.pointee.notificationId)
        }
    }

    /// A delivery as stored, of `user` (its user id, as the caller holds it); its body is read in
    /// place and copied only if it has to wait.
    mutating func stored(_ d: LogStream.Delivery, user: String) {
        let key = Key(user: user, index: d.userIndex)
        if recordsDecisions {
            storedDecisions[user, default: [:]][d.userIndex] = (d.notificationId, d.at, d.app, d.kind, d.reason)
        }
        if !derivedQueue.isEmpty {
            let twin = derivedQueue.first
            if twin.key == key {
                compare(key, derived: derivedQueue.bytes(start: twin.start, end: twin.end), stored: d.body,
                        notification: twin.notification, storedNotification: { d.notificationId })
                derivedQueue.popFirst()
                return
            }
            derivedQueue.spill(into: &derivedWaiting)
        }
        if !derivedWaiting.isEmpty, let derived = derivedWaiting.removeValue(forKey: key) {
            derived.body.withUnsafeBytes {
                compare(key, derived: $0, stored: d.body, notification: derived.notification, storedNotification: { d.notificationId })
            }
        } else {
            let start = storedQueue.arena.count
            storedQueue.arena.append(d.body)
            storedQueue.push(key, from: start, notification: d.notificationId)
        }
    }

    private mutating func compare(_ key: Key, derived: UnsafeRawBufferPointer, stored: UnsafeRawBufferPointer, notification: String?,
                                  storedNotification: () -> String? = { nil }) {
        compared += 1
        var same = derived.count == stored.count
            && (stored.isEmpty || memcmp(derived.baseAddress!, stored.baseAddress!, stored.count) == 0)
        // A stored delivery whose content was erased (its key deleted): its decision is compared.
        if !same, ContentSeal.isErased(stored) {
            same = ContentSeal.decisionOnly(derived) == ContentSeal.decisionOnly(stored)
        }
        if !same {
            differences.append(.init(user: key.user, userIndex: key.index, notification: storedNotification() ?? notification,
                                     stored: String(decoding: stored, as: UTF8.self),
                                     derived: String(decoding: derived, as: UTF8.self)))
        }
    }

    /// Ends the comparison: whatever still waits has no counterpart. Differences are sorted by
    /// user, then ordinal.
    mutating func finish() {
        derivedQueue.spill(into: &derivedWaiting)
        storedQueue.spill(into: &storedWaiting)
        for (key, s) in storedWaiting {
            compared += 1
            differences.append(.init(user: key.user, userIndex: key.index, notification: s.notification,
                                     stored: String(decoding: s.body, as: UTF8.self), derived: nil))
        }
        for (key, d) in derivedWaiting {
            compared += 1
            differences.append(.init(user: key.user, userIndex: key.index, notification: d.notification,
                                     stored: nil, derived: String(decoding: d.body, as: UTF8.self)))
        }
        storedWaiting = [:]
        derivedWaiting = [:]
        for queue in [derivedQueue, storedQueue] { queue.arena.deallocate() }
        derivedQueue = Queue(arenaCapacity: 16)
        storedQueue = Queue(arenaCapacity: 16)
        differences.sort { ($0.user, $0.userIndex) < ($1.user, $1.userIndex) }
    }
}
