// One `herald serve` per database: a second start-up on a served database is refused, saying who
// serves it; a writer that reconnects takes the lock again, and one that finds it taken stops.
import Foundation
import HeraldCore
import HeraldRuntime
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct InstanceLockTests {
    /// The backend pid holding the instance lock in `url`'s database, if any.
    static func holder(_ admin: PGConnection) throws -> String? {
        try admin.execute("""
            SELECT l.pid FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted AND l.objid = \(InstanceLock.key)
              AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
            """).string(0, 0)
    }

    @Test func aSecondServiceOnTheSameDatabaseIsRefusedUntilTheFirstStops() throws {
        let first = try TestServer()
        var refusal = ""
        do {
            _ = try TestServer(url: first.url) { $0.instanceLockWaitMilliseconds = 0 }
            Issue.record("a second service started on a database the first serves")
        } catch {
            refusal = "\(error)"
        }
        #expect(refusal.contains("Another herald serve is already serving this database"), "\(refusal)")
        #expect(refusal.contains("(herald, connected from"), "names the holder: \(refusal)")
        // The first still serves, untouched by the refused start-up.
        #expect(try first.client().call(["op": "ping"])["ok"] == true)
        first.stop()  // its backend lets go as it exits, a moment after: the default wait covers it
        let second = try TestServer(url: first.url)
        defer { second.stop() }
        #expect(try second.client().call(["op": "ping"])["ok"] == true)
    }

    /// A start-up waits for a holder that lets go (as a killed process's backend does).
    @Test func theLockIsWaitedForWhileItsHolderLetsGo() throws {
        let url = try TestPostgres.freshDatabase()
        let holder = try PGConnection.connect(url)
        try InstanceLock.take(holder, waitMilliseconds: 0)
        var tries = 0
        let waiting = try PGConnection.connect(url)
        try InstanceLock.take(waiting, waitMilliseconds: 5_000) { ms in
            tries += 1
            if tries == 3 { holder.close() }  // its backend lets go as it exits, a moment later
            InstanceLock.pause(ms)
        }
        #expect(tries >= 3)
        let late = try PGConnection.connect(url)
        #expect(throws: StoreError.self) { try InstanceLock.take(late, waitMilliseconds: 200) { _ in } }
    }

    /// The lock lives on the events writer's session: when that session ends (as in a PostgreSQL
    /// restart) the reconnected writer takes it again. When another session has it by then, the
    /// service warns and serves on (best effort: the holder may be its own earlier session).
    @Test func aReconnectedWriterRetakesTheLockOrWarnsWhenAnotherHasIt() throws {
        let log = LogLines()
        let server = try TestServer(log: log)
        defer { server.stop() }
        let c = try server.client()
        let admin = try PGConnection.connect(server.url)
        let first = try #require(try Self.holder(admin))
        try admin.execute("SELECT pg_terminate_backend(\(first))")
        var again: String?
        for _ in 0..<500 {
            again = try Self.holder(admin)
            if let again, again != first { break }
            usleep(10_000)
        }
        #expect(again != nil && again != first, "the reconnected writer holds the lock again")
        #expect(try c.call(["op": "registerApp", "app": "a", "entitlements": []])["ok"] == true)

        // Another session waits for the lock before the writer's session ends, so it gets it first.
        let other = try PGConnection.connect(server.url)
        nonisolated(unsafe) let waiter = other
        let granted = DispatchSemaphore(value: 0)
        Thread { _ = try? waiter.execute("SELECT pg_advisory_lock(\(InstanceLock.key))"); granted.signal() }.start()
        for _ in 0..<500 {
            let waiting = try admin.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND objid = \(InstanceLock.key)")
            if waiting.string(0, 0) == "1" { break }
            usleep(10_000)
        }
        try admin.execute("SELECT pg_terminate_backend(\(try #require(again)))")
        #expect(granted.wait(timeout: .now() + 10) == .success, "the waiting session gets the lock")
        for _ in 0..<500 where log.matching("warning: serving without the instance lock").isEmpty { usleep(10_000) }
        #expect(!log.matching("warning: serving without the instance lock", "Another herald serve").isEmpty, "\(log.all.suffix(5))")
        #expect(try c.call(["op": "registerApp", "app": "b", "entitlements": []])["ok"] == true, "still serving")
        other.close()
    }
}
