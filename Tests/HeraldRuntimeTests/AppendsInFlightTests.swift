// Appends in flight: timers never fire past one, a key in flight makes its re-send wait, a lost outcome holds until read back.
import HeraldCore
@testable import HeraldRuntime
import Testing

@Suite struct AppendsInFlightTests {
    static func at(_ text: String) -> Instant { Instant(rfc3339: text)! }

    @Test func timersMayNotFirePastTheOldestAppendNotYetAnswered() {
        var appends = AppendsInFlight()
        let now = Self.at("2026-03-27T09:00:00Z")
        #expect(appends.timersMayFire(upTo: now) == now && appends.latestTime == nil)
        appends.sent(at: Self.at("2026-03-27T08:00:00Z"))
        appends.sent(at: Self.at("2026-03-27T08:30:00Z"))
        #expect(appends.timersMayFire(upTo: now) == Self.at("2026-03-27T08:00:00Z"))
        #expect(appends.latestTime == Self.at("2026-03-27T08:30:00Z"))
        appends.answered()
        #expect(appends.timersMayFire(upTo: now) == Self.at("2026-03-27T08:30:00Z"))
        appends.answered()
        #expect(appends.timersMayFire(upTo: now) == now && appends.times.isEmpty)
    }

    @Test func aKeyInFlightMakesItsResendWaitAndItsWaitersRunOnce() {
        var appends = AppendsInFlight()
        let key = HeraldService.InFlightKey(app: "com.example.mail", id: "n1", user: "alice")
        #expect(!appends.isInFlight(key))
        let claimed = appends.claim(key)
        #expect(claimed && appends.isInFlight(key))
        let claimedAgain = appends.claim(key)
        #expect(!claimedAgain, "claimed already: the re-send waits")
        var ran: [Int] = []
        appends.wait(for: key) { ran.append(1) }
        appends.wait(for: key) { ran.append(2) }
        let waiters = appends.release(key)
        #expect(!appends.isInFlight(key) && waiters.count == 2)
        waiters.forEach { $0() }
        #expect(ran == [1, 2])
        let none = appends.release(key)
        let free = appends.claim(key)
        #expect(none.isEmpty && free)
    }

    @Test func aLostOutcomeHoldsTimersAtTheOldestUntilReconciled() {
        var appends = AppendsInFlight()
        let now = Self.at("2026-03-27T09:00:00Z")
        appends.outcomeLost(at: Self.at("2026-03-27T08:45:00Z"))
        appends.outcomeLost(at: Self.at("2026-03-27T08:15:00Z"))
        appends.outcomeLost(at: Self.at("2026-03-27T08:50:00Z"))
        #expect(appends.unknownCommitSince == Self.at("2026-03-27T08:15:00Z"))
        #expect(appends.timersMayFire(upTo: now) == Self.at("2026-03-27T08:15:00Z"))
        appends.reconciled()
        #expect(appends.unknownCommitSince == nil && appends.timersMayFire(upTo: now) == now)
    }
}
