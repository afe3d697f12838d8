// How many events pass between snapshots: the configured interval, or more with many users (a
// capture costs per user; `ServiceConfiguration.snapshotEventsPerUser`).
@testable import HeraldRuntime
import Testing

@Suite struct SnapshotIntervalTests {
    @Test func theIntervalIsTheConfiguredOneWhileUsersAreFew() {
        #expect(HeraldService.snapshotInterval(every: 250_000, users: 10_000, eventsPerUser: 1) == 250_000)
        #expect(HeraldService.snapshotInterval(every: 10, users: 3, eventsPerUser: 1) == 10)
    }

    @Test func theIntervalGrowsWithTheUsersPastIt() {
        #expect(HeraldService.snapshotInterval(every: 250_000, users: 1_000_000, eventsPerUser: 1) == 1_000_000)
        #expect(HeraldService.snapshotInterval(every: 250_000, users: 1_000_000, eventsPerUser: 3) == 3_000_000)
    }

    @Test func zeroEventsPerUserKeepsTheConfiguredIntervalAlone() {
        #expect(HeraldService.snapshotInterval(every: 250_000, users: 5_000_000, eventsPerUser: 0) == 250_000)
        #expect(HeraldService.snapshotInterval(every: 250_000, users: 5_000_000, eventsPerUser: -2) == 250_000, "a negative count is none")
    }

    @Test func anOverflowingProductMeansNever() {
        #expect(HeraldService.snapshotInterval(every: 1, users: Int.max / 2, eventsPerUser: 3) == Int.max)
    }
}
