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
    private(set) var compared = 0
    private(set) var differences: [Replayer.Difference] = []

    /// Kept only under a what-if, which lists changed decisions per subject.
    let recordsDecisions: Bool
    private(set) var storedDecisions: [String: [Int64: Decision]] = [:]
    private(set) var derivedDecisions: [String: [Int64: Decision]] = [:]

    init(recordsDecisions: Bool) { self.recordsDecisions = recordsDecisions }

    /// A delivery the replay derived; `body` is its canonical bytes.
    mutating func derived(_ d: Delivery, index: Int64, body: [UInt8]) {
        let key = Key(user: d.user, index: index)
        if recordsDecisions {
            derivedDecisions[d.user, default: [:]][index] = (d.notificationId, d.at, d.app, d.kind.rawValue, d.reason)
        }
        if let stored = storedWaiting.removeValue(forKey: key) {
            settle(key, stored: stored.body, derived: body, notification: stored.notification ?? d.notificationId)
        } else {
            derivedWaiting[key] = (body, d.notificationId)
        }
    }

    /// A delivery as stored; `d.body` is read in place and copied only if it has to wait.
    mutating func stored(_ d: LogStream.Delivery) {
        let key = Key(user: d.user, index: d.userIndex)
        if recordsDecisions {
            storedDecisions[d.user, default: [:]][d.userIndex] = (d.notificationId, d.at, d.app, d.kind, d.reason)
        }
        if let derived = derivedWaiting.removeValue(forKey: key) {
            compared += 1
            if !Self.same(derived.body, d.body) {
                differences.append(.init(user: key.user, userIndex: key.index, notification: d.notificationId ?? derived.notification,
                                         stored: String(decoding: d.body, as: UTF8.self),
                                         derived: String(decoding: derived.body, as: UTF8.self)))
            }
        } else {
            storedWaiting[key] = (Array(d.body), d.notificationId)
        }
    }

    /// Byte equality with memcmp (the generic `elementsEqual` goes element by element).
    private static func same(_ a: [UInt8], _ b: UnsafeRawBufferPointer) -> Bool {
        guard a.count == b.count else { return false }
        if b.isEmpty { return true }
        return a.withUnsafeBytes { memcmp($0.baseAddress!, b.baseAddress!, b.count) == 0 }
    }

    private mutating func settle(_ key: Key, stored: [UInt8], derived: [UInt8], notification: String?) {
        compared += 1
        if stored != derived {
            differences.append(.init(user: key.user, userIndex: key.index, notification: notification,
                                     stored: String(decoding: stored, as: UTF8.self), derived: String(decoding: derived, as: UTF8.self)))
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
            differences.append(.init(user: key.user, userIndex: key.index, notification: d.notification,
                                     stored: nil, derived: String(decoding: d.body, as: UTF8.self)))
        }
        storedWaiting = [:]
        derivedWaiting = [:]
        differences.sort { ($0.user, $0.userIndex) < ($1.user, $1.userIndex) }
    }
}
