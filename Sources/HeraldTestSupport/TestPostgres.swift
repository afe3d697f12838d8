// A throwaway PostgreSQL cluster per test process, and a fresh migrated database per test.
import Foundation
import Glibc
import HeraldStore
import Synchronization

/// The test run's private PostgreSQL: started on first use in a temporary folder, crashed and
/// removed when the process exits. Each test asks for its own database, so tests run in
/// parallel without seeing each other's rows.
public enum TestPostgres {
    private static let state = Mutex<(cluster: LocalCluster?, error: StoreError?, counter: Int)>((nil, nil, 0))

    /// The shared cluster, started on first call.
    public static func cluster() throws(StoreError) -> LocalCluster {
        let result: Result<LocalCluster, StoreError> = state.withLock { s in
            if let c = s.cluster { return .success(c) }
            if let e = s.error { return .failure(e) }
            do throws(StoreError) {
                removeClustersOfDeadProcesses(in: FileManager.default.temporaryDirectory.path)
                let base = FileManager.default.temporaryDirectory.path + "/herald-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
                let c = try LocalCluster(dataDirectory: base + "/pgdata")
                try c.start()
                s.cluster = c
                atexit {
                    TestPostgres.state.withLock { s in
                        guard let c = s.cluster else { return }
                        c.kill()
                        try? FileManager.default.removeItem(atPath: (c.dataDirectory as NSString).deletingLastPathComponent)
                    }
                }
                return .success(c)
            } catch {
                s.error = error
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// Stops and removes the clusters of test processes that died without running their `atexit`
    /// (a crash, SIGKILL, a debugger stopped): each left a server running, with its shared memory,
    /// and a folder of ~100 MB. A folder is `herald-test-<pid>-<random>`; one whose process is
    /// still alive (another test run, or a reused pid) is left alone. Returns the folders removed.
    @discardableResult
    public static func removeClustersOfDeadProcesses(in directory: String) -> [String] {
        var removed: [String] = []
        for name in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] where name.hasPrefix("herald-test-") {
            let parts = name.split(separator: "-")
            guard parts.count == 4, let pid = Int32(parts[2]), pid != getpid() else { continue }
            if Glibc.kill(pid, 0) == 0 || errno == EPERM { continue }
            let base = directory + "/" + name
            // `pgdata`, or a Citus cluster's `coordinator` and `worker…` (TestCitus).
            for data in (try? FileManager.default.contentsOfDirectory(atPath: base)) ?? []
            where FileManager.default.fileExists(atPath: base + "/" + data + "/postmaster.pid") {
                (try? LocalCluster(dataDirectory: base + "/" + data))?.kill()
            }
            try? FileManager.default.removeItem(atPath: base)
            removed.append(name)
        }
        return removed
    }

    /// Creates an empty database (optionally migrated) and returns its connection string.
    /// `createOptions`: what follows `CREATE DATABASE name` (e.g. an ICU locale, to test
    /// behaviour that depends on the database's collation).
    public static func freshDatabase(migrated: Bool = true, prefix: String = "t",
                                     createOptions: String = "") throws(StoreError) -> String {
        let c = try cluster()
        let n = state.withLock { s in s.counter += 1; return s.counter }
        let name = "\(prefix)_\(getpid())_\(n)"
        let admin = try PGConnection.connect(c.connectionString())
        try admin.execute("CREATE DATABASE \(name) \(createOptions)")
        admin.close()
        let url = c.connectionString(database: name)
        if migrated {
            let conn = try PGConnection.connect(url)
            try Migrator.migrate(conn)
            conn.close()
        }
        return url
    }
}
