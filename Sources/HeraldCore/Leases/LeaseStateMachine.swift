// One partition's lease as an instance holds it: taken, renewed on time, lost when the database says so.

/// The lease of one partition from its holder's side (SPEC §9). The database is the authority: a
/// take bumps the partition's epoch, a renewal succeeds only while the row still carries that
/// epoch, and expiry is judged on the database's clock. This machine decides when to renew and
/// what a lost renewal means, without I/O: the service sends what it returns and reports back.
///
/// A renewal that cannot reach the database (an outage, a row lock held) does not lose the lease
/// by itself: the epoch check in every append keeps a holder that lost it from storing anything,
/// so the holder keeps serving, and keeps renewing, until the database says another instance took
/// over (a renewal or an append refused). `mayHaveExpired` tells operators when its own view of
/// the lease ran out meanwhile.
public struct LeaseStateMachine: Sendable, Equatable {
    public enum State: Sendable, Equatable {
        /// Not held.
        case released
        /// Held at `epoch`; valid (by the holder's clock) until `validUntil` milliseconds.
        case held(epoch: Int64, validUntil: Int64, renewalInFlight: Bool)
        /// The database said another instance holds the partition (or the epoch moved on).
        case lost(epoch: Int64)
    }

    public enum Action: Sendable, Equatable {
        case none
        /// Send the renewal for this epoch.
        case renew(epoch: Int64)
        /// Stop appending to the partition and hand its requests elsewhere: the lease is gone.
        case stopServing(epoch: Int64)
    }

    public let ttlMilliseconds: Int64
    public private(set) var state: State = .released

    public init(ttlMilliseconds: Int64) {
        precondition(ttlMilliseconds > 0)
        self.ttlMilliseconds = ttlMilliseconds
    }

    /// Renew when a third of the lease has passed since the last success.
    public var renewEveryMilliseconds: Int64 { max(ttlMilliseconds / 3, 1) }

    public var epoch: Int64? {
        if case .held(let epoch, _, _) = state { return epoch }
        return nil
    }

    /// The take committed at `epoch`, at the holder's `now` (sent just before the take: the
    /// database's expiry is later than the holder's view).
    public mutating func taken(epoch: Int64, sentAt now: Int64) {
        state = .held(epoch: epoch, validUntil: now + ttlMilliseconds, renewalInFlight: false)
    }

    /// The lease ran out by the holder's clock (renewals did not reach the database): another
    /// instance may have taken the partition, which the next renewal or append will tell.
    public func mayHaveExpired(now: Int64) -> Bool {
        if case .held(_, let validUntil, _) = state { return now >= validUntil }
        return false
    }

    /// The renewal timer fired at `now`.
    public mutating func renewalDue(now: Int64) -> Action {
        guard case .held(let epoch, let validUntil, let inFlight) = state else { return .none }
        if inFlight { return .none }
        state = .held(epoch: epoch, validUntil: validUntil, renewalInFlight: true)
        return .renew(epoch: epoch)
    }

    /// The renewal sent at `sentAt` committed: the row still carries our epoch.
    public mutating func renewed(sentAt: Int64) {
        guard case .held(let epoch, let validUntil, _) = state else { return }
        state = .held(epoch: epoch, validUntil: max(validUntil, sentAt + ttlMilliseconds), renewalInFlight: false)
    }

    /// The renewal found another epoch (or owner): the partition was taken over.
    public mutating func renewalRefused() -> Action {
        guard case .held(let epoch, _, _) = state else { return .none }
        state = .lost(epoch: epoch)
        return .stopServing(epoch: epoch)
    }

    /// The renewal did not reach the database (connection lost): try again at the next tick.
    public mutating func renewalFailed() {
        guard case .held(let epoch, let validUntil, _) = state else { return }
        state = .held(epoch: epoch, validUntil: validUntil, renewalInFlight: false)
    }

    /// An append was refused by the epoch check: another instance holds the partition.
    public mutating func appendFenced() -> Action { renewalRefused() }

    /// The holder gave the partition up (a graceful stop).
    public mutating func released() { state = .released }
}
