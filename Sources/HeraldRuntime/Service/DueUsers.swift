// The users whose timers are due and not yet fired, fired a slice per loop turn, and who waits for them.
import DequeModule
import HeraldCore

/// Users the timing wheel reported due, each with the horizon it was taken at, oldest first:
/// `HeraldService.fireDueSlice` fires them a slice per loop turn. Waiters (the `clock` op's
/// reply) run once every user taken so far has fired.
struct DueUsers {
    /// Each due user's ordinal and the horizon it was taken at, oldest first.
    private(set) var queue: Deque<(ordinal: UInt32, horizon: Instant)> = []
    /// Run once `queue` is empty (then after the deliveries decided so far commit).
    private var waiters: [() -> Void] = []

    var isEmpty: Bool { queue.isEmpty }
    var first: (ordinal: UInt32, horizon: Instant)? { queue.first }

    /// The wheel reported the user's timer due by `horizon`.
    mutating func taken(ordinal: Int, horizon: Instant) { queue.append((UInt32(ordinal), horizon)) }

    /// The first user was fired.
    mutating func fired() { queue.removeFirst() }

    /// `done` waits until every user taken so far has fired; false when none is due (run it now).
    mutating func wait(_ done: @escaping () -> Void) -> Bool {
        guard !queue.isEmpty else { return false }
        waiters.append(done)
        return true
    }

    /// Every user taken has fired: the waiters, to run (each once).
    mutating func takeWaiters() -> [() -> Void] {
        guard queue.isEmpty else { return [] }
        defer { waiters.removeAll() }
        return waiters
    }
}
