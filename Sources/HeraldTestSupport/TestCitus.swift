// A throwaway Citus cluster per test process (a coordinator and two workers on loopback ports), where Citus is installed.
import Dispatch
import Foundation
import Glibc
import HeraldStore
import Synchronization

/// Citus is not packaged for Debian 12: it is built by hand (docs/citus.md, "On Citus").
/// Tests that need it ask `TestCitus.isInstalled` (or call `cluster()`, which throws
/// `TestCitus.missing` when it is not) and are skipped, with `missingReason` as the message, on a
/// machine without it.
///
/// The cluster is started on first use and shared by the test process, like `TestPostgres`'s:
/// three private PostgreSQL servers, each with `shared_preload_libraries = citus`, crashed and
/// removed at exit. `freshDatabase` makes a database on every node, with the extension, and
/// registers the workers with the coordinator; its URL is the coordinator's. Several `herald
/// serve` processes may share that URL (`ServeProcess(databaseURL:)`).
public enum TestCitus {
    /// The folder PostgreSQL loads extension libraries from: `pg_config --pkglibdir` beside the
    /// server programs the test clusters run (LocalCluster.findBinaries), else `<bin>/../lib`.
    public static let libraryDirectory: String? = {
        guard let bin = try? LocalCluster.findBinaries() else { return nil }
        if let dir = run(bin + "/pg_config", ["--pkglibdir"]) { return dir }
        return ((bin as NSString).deletingLastPathComponent as NSString).appendingPathComponent("lib")
    }()

    /// The folder of extension control files (`pg_config --sharedir` + /extension).
    public static let extensionDirectory: String? = {
        guard let bin = try? LocalCluster.findBinaries(), let share = run(bin + "/pg_config", ["--sharedir"]) else { return nil }
        return share + "/extension"
    }()

    /// Why Citus tests cannot run here (nil: they can).
    public static let missingReason: String? = {
        guard let lib = libraryDirectory else { return "Citus tests skipped: PostgreSQL's server programs were not found" }
        guard FileManager.default.fileExists(atPath: lib + "/citus.so") else {
            return "Citus tests skipped: citus.so is not in \(lib) (Citus is built by hand; docs/citus.md, \"On Citus\")"
        }
        if let ext = extensionDirectory, !FileManager.default.fileExists(atPath: ext + "/citus.control") {
            return "Citus tests skipped: citus.so is in \(lib) but citus.control is not in \(ext) (run Citus's make install)"
        }
        return nil
    }()

    /// Whether Citus is installed for the server the tests run (citus.so in its library folder).
    public static var isInstalled: Bool { missingReason == nil }

    /// The error `cluster()` and `freshDatabase` throw where Citus is not installed.
    public static var missing: StoreError { .configuration(missingReason ?? "Citus is installed") }

    /// Settings of every node: Citus preloaded; prepared transactions for its two-phase commits
    /// (writes to reference tables, multi-shard writes); small shared buffers (three servers).
    public static let nodeSettings = [
        "shared_preload_libraries=citus", "max_prepared_transactions=100", "shared_buffers=64MB",
        "citus.log_remote_commands=off",
    ]

    private static let state = Mutex<(cluster: CitusCluster?, error: StoreError?, counter: Int)>((nil, nil, 0))

    /// The shared cluster, started on first call (~2 s: three initdb and three servers).
    public static func cluster() throws(StoreError) -> CitusCluster {
        guard isInstalled else { throw missing }
        let result: Result<CitusCluster, StoreError> = state.withLock { s in
            if let c = s.cluster { return .success(c) }
            if let e = s.error { return .failure(e) }
            do throws(StoreError) {
                TestPostgres.removeClustersOfDeadProcesses(in: FileManager.default.temporaryDirectory.path)
                let base = FileManager.default.temporaryDirectory.path + "/herald-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
                let c = try CitusCluster(folder: base, workers: 2)
                s.cluster = c
                atexit {
                    TestCitus.state.withLock { s in
                        guard let c = s.cluster else { return }
                        c.kill()
                        try? FileManager.default.removeItem(atPath: c.folder)
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

    /// A new database on the coordinator and every worker, with the citus extension and the
    /// workers registered: the coordinator's connection string. `migrated`: the schema applied and
    /// distributed as `herald migrate --citus [--partitions P]` does.
    public static func freshDatabase(migrated: Bool = true, partitions: Int = 1, prefix: String = "c") throws(StoreError) -> String {
        let c = try cluster()
        let n = state.withLock { s in s.counter += 1; return s.counter }
        let url = try c.createDatabase("\(prefix)_\(getpid())_\(n)")
        if migrated {
            let conn = try PGConnection.connect(url)
            defer { conn.close() }
            try Migrator.migrate(conn)
            if partitions != 1 { try conn.execute("SELECT herald_set_partitions(\(partitions))") }
            try CitusDistribution.distribute(conn)
        }
        return url
    }

    /// A program's first output line, nil when it fails.
    private static func run(_ path: String, _ arguments: [String]) -> String? {
        guard FileManager.default.isExecutableFile(atPath: path) else { return nil }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path)
        p.arguments = arguments
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        guard (try? p.run()) != nil else { return nil }
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else { return nil }
        return String(decoding: data, as: UTF8.self).split(separator: "\n").first.map(String.init)
    }
}

/// A Citus coordinator and its workers, each a private PostgreSQL on a loopback port.
public final class CitusCluster: @unchecked Sendable {
    /// The folder holding the nodes' data folders (`coordinator`, `worker1`, …).
    public let folder: String
    public let coordinator: LocalCluster
    public let workers: [LocalCluster]

    /// initdb and start a coordinator and `workers` workers in `folder`.
    public init(folder: String, workers count: Int) throws(StoreError) {
        self.folder = folder
        coordinator = try LocalCluster(dataDirectory: folder + "/coordinator")
        var workers: [LocalCluster] = []
        for i in 1...max(count, 1) { workers.append(try LocalCluster(dataDirectory: folder + "/worker\(i)")) }
        self.workers = workers
        let nodes = [coordinator] + workers
        for node in nodes { node.serverSettings = TestCitus.nodeSettings }
        try Self.onEveryNode(nodes) { node throws(StoreError) in try node.start() }
    }

    /// Runs `body` for every node at once (initdb and CREATE DATABASE take ~1 s each); the first
    /// error, if any, is thrown once all are done.
    static func onEveryNode(_ nodes: [LocalCluster], _ body: @Sendable (LocalCluster) throws(StoreError) -> Void) throws(StoreError) {
        let errors = Mutex<[StoreError]>([])
        DispatchQueue.concurrentPerform(iterations: nodes.count) { i in
            do throws(StoreError) { try body(nodes[i]) } catch { errors.withLock { $0.append(error) } }
        }
        if let first = errors.withLock({ $0.first }) { throw first }
    }

    /// Every node, the coordinator first.
    public var nodes: [LocalCluster] { [coordinator] + workers }

    /// Creates database `name` on every node with the citus extension, registers the coordinator
    /// and the workers in it, and returns the coordinator's connection string for it. Databases
    /// are made on each node by hand: Citus 13 propagates CREATE DATABASE only under
    /// `citus.enable_create_database_propagation`, and never the extension inside it.
    public func createDatabase(_ name: String) throws(StoreError) -> String {
        try Self.onEveryNode(nodes) { node throws(StoreError) in
            let admin = try PGConnection.connect(node.connectionString())
            defer { admin.close() }
            try admin.execute("CREATE DATABASE \(name)")
            let db = try PGConnection.connect(node.connectionString(database: name))
            defer { db.close() }
            try db.execute("SET client_min_messages = warning")
            try db.execute("CREATE EXTENSION citus")
        }
        let conn = try PGConnection.connect(coordinator.connectionString(database: name))
        defer { conn.close() }
        try conn.execute("SET client_min_messages = warning")
        try conn.execute("SELECT citus_set_coordinator_host('127.0.0.1', \(coordinator.port))")
        for w in workers { try conn.execute("SELECT citus_add_node('127.0.0.1', \(w.port))") }
        return coordinator.connectionString(database: name)
    }

    /// Crashes every node (`pg_ctl -m immediate`), as at the end of a test process.
    public func kill() { for node in nodes { node.kill() } }
}
