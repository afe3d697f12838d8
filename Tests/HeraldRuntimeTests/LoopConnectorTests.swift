// Connecting on the service loop through a host name: the look-up runs beside the loop, never in it.
import Foundation
import Glibc
import HeraldCore
import HeraldStore
import HeraldTestSupport
import Synchronization
@testable import HeraldRuntime
import Testing

@Suite struct LoopConnectorTests {
    /// Drives `loop` until `done` says so (at most ~30 s of iterations that each wait for an event).
    static func run(_ loop: EventLoop, until done: () -> Bool) {
        let guardTimer = loop.timer {}
        guardTimer.arm(afterMilliseconds: 30_000)
        for _ in 0..<100_000 where !done() { loop.runOnce(block: true) }
    }

    static func byName(_ url: String) -> String { url.replacingOccurrences(of: "host=127.0.0.1", with: "host=localhost") }

    @Test func aDatabaseURLWithAHostNameConnects() throws {
        let url = Self.byName(try TestPostgres.freshDatabase(migrated: false))
        #expect(HostResolution.namesToResolve(url) == ["localhost"])
        let loop = EventLoop()
        var result: Result<PGConnection, StoreError>?
        let connector = LoopConnector(loop: loop, url: url) { result = $0 }
        Self.run(loop) { result != nil }
        _ = connector
        let conn = try #require(try result?.get())
        #expect(try conn.execute("SELECT 41 + 1").string(0, 0) == "42")
        conn.close()
    }

    /// The look-up holds until the loop has run a timer five times: were it run on the loop (as
    /// `PQconnectStart` does), the timer could never fire and the look-up would give up instead.
    @Test func aSlowLookUpLeavesTheLoopRunning() throws {
        let url = Self.byName(try TestPostgres.freshDatabase(migrated: false))
        let loop = EventLoop()
        final class Seen: Sendable {
            let ticks = Atomic<Int>(0)
            let loopRanMeanwhile = Atomic<Bool>(false)
        }
        let seen = Seen()
        let ticker = loop.timer { _ = seen.ticks.add(1, ordering: .relaxed) }
        ticker.arm(afterMilliseconds: 5)
        var result: Result<PGConnection, StoreError>?
        let connector = LoopConnector(loop: loop, url: url, resolver: { names in
            for _ in 0..<2_000 where seen.ticks.load(ordering: .relaxed) < 5 { usleep(5_000) }
            seen.loopRanMeanwhile.store(seen.ticks.load(ordering: .relaxed) >= 5, ordering: .relaxed)
            return HostResolution.resolve(names)
        }) { result = $0 }
        Self.run(loop) {
            if seen.ticks.load(ordering: .relaxed) < 5 { ticker.arm(afterMilliseconds: 5) }
            return result != nil
        }
        _ = connector
        let ranMeanwhile = seen.loopRanMeanwhile.load(ordering: .relaxed)
        #expect(ranMeanwhile, "the loop's timer fired while the host was being looked up")
        let conn = try #require(try result?.get())
        conn.close()
    }

    /// The whole path in the service: a database URL naming `localhost`, the events' writer's
    /// backend terminated, the writer reconnected through a look-up beside the loop, and every
    /// submit after it acknowledged and stored once.
    @Test func aServiceOnAHostNameReconnectsItsWriterAfterItsBackendIsLost() throws {
        let log = LogLines()
        let server = try TestServer(url: Self.byName(try TestPostgres.freshDatabase()), log: log)
        defer { server.stop() }
        let c = try server.client()
        try ServiceTests.setUpAlice(c)
        #expect(try c.call(ServiceTests.submit("n1"))["ok"] == true)
        let pid = { (stats: JSONValue) in stats["storeBackendPID"]?.intValue ?? 0 }
        let before = pid(try c.call(["op": "stats"]))
        let admin = try PGConnection.connect(server.url)
        defer { admin.close() }
        try admin.execute("SELECT pg_terminate_backend($1::int)", [String(before)])
        let after = try server.statsWhen { pid($0) != 0 && pid($0) != before }
        #expect(pid(after) != 0 && pid(after) != before, "a new connection: \(after.canonicalString)")
        #expect(!log.matching("reconnected to PostgreSQL").isEmpty, "\(log.all)")
        #expect(try c.call(ServiceTests.submit("n2"))["ok"] == true)
        #expect(try admin.execute("SELECT count(*) FROM events WHERE type = 'submit'").int64(0, 0) == 2)
    }

    @Test func aFailedLookUpFailsTheAttemptWithTheResolversReason() throws {
        let loop = EventLoop()
        var result: Result<PGConnection, StoreError>?
        let connector = LoopConnector(loop: loop, url: "host=db.invalid port=5432 dbname=herald", resolver: { _ in
            .failure(.unavailable("could not resolve the database host “db.invalid”: Name or service not known."))
        }) { result = $0 }
        Self.run(loop) { result != nil }
        _ = connector
        guard case .failure(let error)? = result else { Issue.record("connected: \(String(describing: result))"); return }
        #expect("\(error)".contains("could not resolve the database host “db.invalid”"))
    }
}
