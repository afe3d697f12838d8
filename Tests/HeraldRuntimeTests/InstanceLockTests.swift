// One `herald serve` per database: a second start-up on a served database is refused, saying who serves it.
import Foundation
import HeraldCore
import HeraldRuntime
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct InstanceLockTests {
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
        #expect(refusal.contains("(herald serve, connected from"), "names the holder: \(refusal)")
        // The first still serves, untouched by the refused start-up.
        #expect(try first.client().call(["op": "ping"])["ok"] == true)
        first.stop()
        let second = try TestServer(url: first.url) { $0.instanceLockWaitMilliseconds = 0 }
        defer { second.stop() }
        #expect(try second.client().call(["op": "ping"])["ok"] == true)
    }

    /// A start-up waits for a holder that lets go (as a killed process's backend does), then serves.
    @Test func theLockIsWaitedForWhileItsHolderLetsGo() throws {
        let url = try TestPostgres.freshDatabase()
        let holder = try InstanceLock.acquire(url, waitMilliseconds: 0)
        var tries = 0
        let lock = try InstanceLock.acquire(url, waitMilliseconds: 1_000) { _ in
            tries += 1
            if tries == 3 { holder.release() }
        }
        lock.release()
        #expect(tries == 3)
        #expect(throws: StoreError.self) {
            let again = try InstanceLock.acquire(url, waitMilliseconds: 0)
            _ = try InstanceLock.acquire(url, waitMilliseconds: 200) { _ in }
            again.release()
        }
    }
}
