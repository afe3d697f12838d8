// Event appends handed to the writer and not yet answered: their engine times, their idempotency keys and waiters, lost outcomes.
import DequeModule
import HeraldCore

/// What the service knows of the event appends it has sent and not yet seen answered. Timers may
/// not fire past an append not yet committed (it is folded first, as replay will), a request
/// whose idempotency key is in flight waits for it (`waiters`), and an append whose COMMIT reply
/// was lost with the connection holds new appends and timers until the log is read back.
struct AppendsInFlight {
    /// Engine times of appends not yet answered, oldest first (answers come in this order).
    private(set) var times: Deque<Instant> = []
    /// Idempotency keys in flight, each with the requests waiting for it: a re-send racing its
    /// original is admitted again once the original committed (and so answered as a duplicate).
    private var keys: [HeraldService.InFlightKey: [() -> Void]] = [:]
    /// Engine time of the oldest append whose COMMIT outcome is unknown (the connection broke with
    /// it in flight): it may have committed. Until the log is read back after the reconnect
    /// (`reconciled`), new appends are refused and timers do not fire past it.
    private(set) var unknownCommitSince: Instant?

    /// An append at engine time `at` was sent.
    mutating func sent(at: Instant) { times.append(at) }

    /// The oldest append was answered (committed or failed).
    mutating func answered() { times.removeFirst() }

    /// The latest engine time among the appends not yet answered.
    var latestTime: Instant? { times.max() }

    /// `horizon`, or earlier: no later than an append not yet answered, nor one of unknown outcome.
    func timersMayFire(upTo horizon: Instant) -> Instant {
        var h = horizon
        if let oldest = times.first { h = min(h, oldest) }
        if let unknown = unknownCommitSince { h = min(h, unknown) }
        return h
    }

    /// Whether an append with this key is in flight.
    func isInFlight(_ key: HeraldService.InFlightKey) -> Bool { keys[key] != nil }

    /// A key of (app, id) in flight for any user: a withdraw that names no user waits for it. A
    /// scan of the keys in flight (a rare request; the keys are those of unanswered appends).
    func anyInFlight(app: String, id: String) -> HeraldService.InFlightKey? {
        keys.keys.first { $0.id == id && $0.app == app }
    }

    /// Claims `key` for an append (one look-up); false, nothing changed, when it is in flight already.
    mutating func claim(_ key: HeraldService.InFlightKey) -> Bool {
        guard let waiters = keys.updateValue([], forKey: key) else { return true }
        keys[key] = waiters
        return false
    }

    /// `waiter` runs once the append holding `key` (in flight) is answered.
    mutating func wait(for key: HeraldService.InFlightKey, _ waiter: @escaping () -> Void) {
        keys[key]!.append(waiter)
    }

    /// The append holding `key` was answered (or never sent): the key is free; its waiters, to run.
    mutating func release(_ key: HeraldService.InFlightKey) -> [() -> Void] {
        keys.removeValue(forKey: key) ?? []
    }

    /// An append at engine time `at` failed while the store's connection was down: it may have committed.
    mutating func outcomeLost(at: Instant) {
        unknownCommitSince = min(unknownCommitSince ?? at, at)
    }

    /// The log was read back after the reconnect: every lost outcome is known.
    mutating func reconciled() { unknownCommitSince = nil }
}
