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
/// A derived delivery waits as the value itself and is encoded only when its stored twin
/// arrives, into one reused buffer, compared in place with the COPY row's bytes: no
/// allocation and no copy per delivery on the common path.
struct DeliveryMatcher {
    /// A delivery's identity: its user and its ordinal in that user's stream.
    struct Key: Hashable {
        var user: String
        var index: Int64
    }

    /// What a what-if report groups by: the decision, not its bytes.
    typealias Decision = (notification: String?, at: Instant, app: String?, kind: String, reason: String)

    private var derivedWaiting: [Key: Delivery] = [:]
    private var storedWaiting: [Key: (body: [UInt8], notification: String?)] = [:]
    /// Where a derived delivery is encoded for comparison (reused; freed by `finish`).
    private var scratch = ByteSink(capacity: 4096)
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
        if let stored = storedWaiting.removeValue(forKey: key) {
            stored.body.withUnsafeBytes { compare(key, d, stored: $0, notification: stored.notification) }
        } else {
            derivedWaiting[key] = d
        }
    }

    /// A delivery as stored; its body is read in place and copied only if it has to wait.
    mutating func stored(_ d: LogStream.Delivery) {
        let key = Key(user: d.user, index: d.userIndex)
        if recordsDecisions {
            storedDecisions[d.user, default: [:]][d.userIndex] = (d.notificationId, d.at, d.app, d.kind, d.reason)
        }
        if let derived = derivedWaiting.removeValue(forKey: key) {
            compare(key, derived, stored: d.body, notification: d.notificationId)
        } else {
            storedWaiting[key] = (Array(d.body), d.notificationId)
        }
    }

    private mutating func compare(_ key: Key, _ derived: Delivery, stored: UnsafeRawBufferPointer, notification: String?) {
        compared += 1
        scratch.removeAll()
        derived.writeBody(to: &scratch)
        let same = scratch.count == stored.count
            && (stored.isEmpty || memcmp(scratch.base, stored.baseAddress!, stored.count) == 0)
        if !same {
            differences.append(.init(user: key.user, userIndex: key.index, notification: notification ?? derived.notificationId,
                                     stored: String(decoding: stored, as: UTF8.self),
                                     derived: String(decoding: scratch.bytes, as: UTF8.self)))
        }
    }

    /// Ends the comparison: whatever still waits has no counterpart. Differences are sorted by
    /// user, then ordinal.
    mutating func finish() {
        for (key, s) in storedWaiting {
            compared += 1
            differences.append(.init(user: key.user, userIndex: key.index, notification: s.notification,
                                     stored: String(decoding: s.body, as: UTF8.self), derived: nil))
        }
        for (key, d) in derivedWaiting {
            compared += 1
            differences.append(.init(user: key.user, userIndex: key.index, notification: d.notificationId,
                                     stored: nil, derived: String(decoding: d.bodyBytes, as: UTF8.self)))
        }
        storedWaiting = [:]
        derivedWaiting = [:]
        scratch.deallocate()
        scratch = ByteSink(capacity: 16)
        differences.sort { ($0.user, $0.userIndex) < ($1.user, $1.userIndex) }
    }
}
