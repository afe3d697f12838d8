// Due users: fired in the order the wheel reported them, and their waiters released once all have fired.
import HeraldCore
@testable import HeraldRuntime
import Testing

@Suite struct DueUsersTests {
    @Test func usersAreFiredInTheOrderTheyWereTakenEachWithItsHorizon() {
        var due = DueUsers()
        #expect(due.isEmpty && due.first == nil)
        due.taken(ordinal: 7, horizon: Instant(millisecondsSinceEpoch: 1_000))
        due.taken(ordinal: 3, horizon: Instant(millisecondsSinceEpoch: 2_000))
        #expect(due.first?.ordinal == 7 && due.first?.horizon == Instant(millisecondsSinceEpoch: 1_000))
        due.fired()
        #expect(due.first?.ordinal == 3)
        due.fired()
        #expect(due.isEmpty)
    }

    @Test func aWaiterRunsOnceEveryUserTakenHasFired() {
        var due = DueUsers()
        var ran = 0
        let waitedWhenIdle = due.wait { ran += 1 }
        #expect(!waitedWhenIdle, "nothing due: the caller runs it now")
        due.taken(ordinal: 1, horizon: .epoch)
        let waited = due.wait { ran += 1 }
        let early = due.takeWaiters()
        #expect(waited && early.isEmpty)
        due.fired()
        let ready = due.takeWaiters()
        ready.forEach { $0() }
        let again = due.takeWaiters()
        #expect(ran == 1 && again.isEmpty)
    }
}
