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
/// A derived delivery is encoded at once into an arena and waits as a byte range in a queue:
/// stored deliveries arrive in the order the replay derives them (both follow the log), so the
/// twin is almost always the queue's first entry — compared in place with the COPY row's bytes
/// (`memcmp`), no hashing, no copy of the `Delivery` value. Anything out of order moves to keyed
/// tables, as owned bytes.
struct DeliveryMatcher {
    /// A delivery's identity: its user and its ordinal in that user's stream.
    struct Key: Hashable {
        var user: String
        var index: Int64
    }

    /// What a what-if report groups by: the decision, not its bytes.
    typealias Decision = (notification: String?, at: Instant, app: String?, kind: String, reason: String)

    private var derivedWaiting: [Key: (body: [UInt8], notification: String?)] = [:]
    private var storedWaiting: [Key: (body: [UInt8], notification: String?)] = [:]
    /// Derived deliveries not yet asked for, in derivation order: their bytes are `arena[start..<end]`.
    private var derivedQueue: [(key: Key, start: Int, end: Int, notification: String?)] = []
    private var queueHead = 0
    /// Where queued derived deliveries are encoded (reset whenever the queue empties; freed by `finish`).
    private var arena = ByteSink(capacity: 1 << 16)
    private(set) var compared = 0
    private(set) var differences: [Replayer.Difference] = []

    /// Kept only under a what-if, which lists changed decisions per subject.
    let recordsDecisions: Bool
    private(set) var storedDecisions: [String: [Int64: Decision]] = [:]
    private(set) var derivedDecisions: [String: [Int64: Decision]] = [:]

    init(recordsDecisions: Bool) {
        self.recordsDecisions = recordsDecisions
    }

    /// A delivery the replay derived, the `index`-th of its user.
    mutating func derived(_ d: Delivery, index: Int64) {
        let key = Key(user: d.user, index: index)
        if recordsDecisions {
            derivedDecisions[d.user, default: [:]][index] = (d.notificationId, d.at, d.app, d.kind.rawValue, d.reason)
        }
        let start = arena.count
        d.writeBody(to: &arena)
        if !storedWaiting.isEmpty, let stored = storedWaiting.removeValue(forKey: key) {
            let derived = UnsafeRawBufferPointer(start: arena.base + start, count: arena.count - start)
            stored.body.withUnsafeBytes { compare(key, derived: derived, stored: $0, notification: stored.notification ?? d.notificationId) }
            arena.truncate(to: start)
        } else {
            derivedQueue.append((key, start, arena.count, d.notificationId))
        }
    }

    /// A delivery as stored; its body is read in place and copied only if it has to wait.
    mutating func stored(_ d: LogStream.Delivery) {
        let key = Key(user: d.user, index: d.userIndex)
        if recordsDecisions {
            storedDecisions[d.user, default: [:]][d.userIndex] = (d.notificationId, d.at, d.app, d.kind, d.reason)
        }
        if queueHead < derivedQueue.count, derivedQueue[queueHead].key == key {
            let entry = derivedQueue[queueHead]
            queueHead += 1
            let derived = UnsafeRawBufferPointer(start: arena.base + entry.start, count: entry.end - entry.start)
            compare(key, derived: derived, stored: d.body, notification: entry.notification, storedNotification: { d.notificationId })
            if queueHead == derivedQueue.count { resetQueue() }
            return
        }
        spillQueue()
        if let derived = derivedWaiting.removeValue(forKey: key) {
            derived.body.withUnsafeBytes {
                compare(key, derived: $0, stored: d.body, notification: derived.notification, storedNotification: { d.notificationId })
            }
        } else {
            storedWaiting[key] = (Array(d.body), d.notificationId)
        }
    }

    private mutating func resetQueue() {
        derivedQueue.removeAll(keepingCapacity: true)
        queueHead = 0
        arena.removeAll()
    }

    /// Moves the queued derived deliveries into the keyed table (a stored one came out of order).
    private mutating func spillQueue() {
        guard queueHead < derivedQueue.count else { return }
        for e in derivedQueue[queueHead...] {
            derivedWaiting[e.key] = (Array(UnsafeRawBufferPointer(start: arena.base + e.start, count: e.end - e.start)), e.notification)
        }
        resetQueue()
    }

    private mutating func compare(_ key: Key, derived: UnsafeRawBufferPointer, stored: UnsafeRawBufferPointer, notification: String?,
                                  storedNotification: () -> String? = { nil }) {
        compared += 1
        let same = derived.count == stored.count
            && (stored.isEmpty || memcmp(derived.baseAddress!, stored.baseAddress!, stored.count) == 0)
        if !same {
            differences.append(.init(user: key.user, userIndex: key.index, notification: storedNotification() ?? notification,
                                     stored: String(decoding: stored, as: UTF8.self),
                                     derived: String(decoding: derived, as: UTF8.self)))
        }
    }

    /// Ends the comparison: whatever still waits has no counterpart. Differences are sorted by
    /// user, then ordinal.
    mutating func finish() {
        spillQueue()
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
        arena.deallocate()
        arena = ByteSink(capacity: 16)
        differences.sort { ($0.user, $0.userIndex) < ($1.user, $1.userIndex) }
    }
}
