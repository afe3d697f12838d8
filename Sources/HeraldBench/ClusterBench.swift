// `herald bench cluster`: aggregate durable-ack ingest of several `herald serve --instance` members beside one instance, forwarding's cost, and failover time.
import ArgumentParser
import Foundation
import Glibc
import HeraldCommandLine
import HeraldCore
import HeraldStore
import HeraldTestSupport
import HeraldWireTesting

struct ClusterBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cluster",
        abstract: "Several herald serve --instance members on one PostgreSQL beside one single instance: acks/s, CPU per submit, forwarding's cost, failover time.",
        discussion: """
            Three runs of the same load in one invocation, each on a fresh database: (1) the baseline, one \
            herald serve without --instance on a one-partition database; (2) one member on a database of \
            --partitions P, every request through its router to its partition services; (3) --instances \
            members, producers spread over them (so most requests are forwarded to another member). Then \
            one member is killed (kill -9) and the time until a submit for one of its partitions is \
            acknowledged again is measured. Processes are the herald executable of this build \
            ($HERALD_BINARY to choose another, e.g. a release build).
            """)

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var fresh: FreshDatabaseOption
    @Option(help: "Submits per run.") var events = 60_000
    @Option(help: "Partitions of the cluster's database.") var partitions = 8
    @Option(help: "Members in the cluster run.") var instances = 3
    @Option(help: "Producer connections.") var producers = 12
    @Option(help: "Outstanding submits per producer.") var window = 64
    @Option(help: "Distinct users.") var users = 2_000
    @Option(name: .customLong("lease-ttl"), help: "The members' lease TTL in seconds (failover waits for it).") var leaseTTL = 5.0
    @Flag(help: "Print JSON instead of a table.") var json = false

    struct Run {
        var acksPerSecond: Double
        var cpuMicrosecondsPerSubmit: Double
    }

    func run() throws {
        try reportingErrors {
            let location = try database.resolve(fresh: fresh)
            defer { location.close() }
            var report = BenchReport("cluster: \(events) submits, \(producers) producers × \(window), \(users) users")
            let single = try measure(location, name: "herald_bench_cluster_1", partitions: 1, members: 1, cluster: false)
            report.row("one instance (P = 1)", String(format: "%.0f acks/s", single.run.acksPerSecond),
                       String(format: "%.1f µs herald CPU/submit", single.run.cpuMicrosecondsPerSubmit), key: "single", value: .double(single.run.acksPerSecond))
            let one = try measure(location, name: "herald_bench_cluster_2", partitions: partitions, members: 1, cluster: true)
            report.row("one member (P = \(partitions))", String(format: "%.0f acks/s", one.run.acksPerSecond),
                       String(format: "%.1f µs herald CPU/submit; %.2f× one instance", one.run.cpuMicrosecondsPerSubmit, one.run.acksPerSecond / single.run.acksPerSecond),
                       key: "oneMember", value: .double(one.run.acksPerSecond))
            let many = try measure(location, name: "herald_bench_cluster_3", partitions: partitions, members: instances, cluster: true, failover: true)
            report.row("\(instances) members (P = \(partitions))", String(format: "%.0f acks/s", many.run.acksPerSecond),
                       String(format: "%.1f µs herald CPU/submit; %.2f× one instance", many.run.cpuMicrosecondsPerSubmit, many.run.acksPerSecond / single.run.acksPerSecond),
                       key: "members", value: .double(many.run.acksPerSecond))
            report.row("forwarding's cost", String(format: "%.1f µs/submit", one.run.cpuMicrosecondsPerSubmit - single.run.cpuMicrosecondsPerSubmit),
                       "herald CPU per submit, one member minus one instance (router parse, loopback hop)", key: "forwardingMicroseconds",
                       value: .double(one.run.cpuMicrosecondsPerSubmit - single.run.cpuMicrosecondsPerSubmit))
            if let failover = many.failoverSeconds {
                report.row("failover", String(format: "%.2f s", failover), String(format: "kill -9 to the first ack on a taken-over partition (TTL %.1f s; goal ≤ 2 × TTL + rebuild)", leaseTTL),
                           key: "failoverSeconds", value: .double(failover))
            }
            report.print(asJSON: json)
        }
    }

    /// One run: the members started on a fresh database, the load to completion, CPU read from /proc.
    private func measure(_ location: DatabaseLocation, name: String, partitions: Int, members: Int, cluster: Bool,
                         failover: Bool = false) throws -> (run: Run, failoverSeconds: Double?) {
        let url = try scratchDatabase(location, name: name, migrate: false)
        let migrate = try PGConnection.connect(url)
        try Migrator.migrate(migrate)
        try migrate.execute("SELECT herald_set_partitions($1)", [String(partitions)])
        migrate.close()
        var processes: [ServeProcess] = []
        defer { for p in processes { _ = p.terminate(timeoutSeconds: 20) } }
        for i in 0..<members {
            let log = FileManager.default.temporaryDirectory.path + "/herald-bench-cluster-\(getpid())-\(i).log"
            var extra = ["--snapshot-every", "0"]
            if cluster { extra += ["--instance", "m\(i)", "--lease-ttl", String(leaseTTL)] }
            let p = try ServeProcess(databaseURL: url, logPath: log, extraArguments: extra)
            try p.start()
            processes.append(p)
        }
        let ports = processes.map(\.port)
        if cluster { try waitUntilServed(ports: ports, partitions: partitions) }
        var load = ClusterLoad()
        load.events = events
        load.producers = producers
        load.window = window
        load.users = users
        load.deferEvery = 0
        load.idPrefix = name
        Log.info("\(name): \(members) \(cluster ? "member(s)" : "instance"), P = \(partitions): preparing \(users) users")
        try load.prepare(ports: ports)
        let cpuBefore = processes.map { BenchMachine.cpuSeconds(pid: String($0.pid)) }.reduce(0, +)
        let started = Date()
        Log.info("\(name): \(events) submits")
        let (acks, _) = try load.run(ports: ports)
        let seconds = Date().timeIntervalSince(started)
        let cpu = processes.map { BenchMachine.cpuSeconds(pid: String($0.pid)) }.reduce(0, +) - cpuBefore
        let run = Run(acksPerSecond: Double(acks.count) / seconds, cpuMicrosecondsPerSubmit: cpu / Double(acks.count) * 1e6)
        var failoverSeconds: Double?
        if failover, processes.count > 1 {
            failoverSeconds = try measureFailover(processes, partitions: partitions, app: load.app)
        }
        return (run, failoverSeconds)
    }

    /// Kills the member owning partition 0's… first partition it owns, then submits for a user of
    /// that partition through another member until one is acknowledged.
    private func measureFailover(_ processes: [ServeProcess], partitions: Int, app: String) throws -> Double {
        let victim = processes[0], survivor = processes[1]
        let routes = try Self.routes(port: survivor.port)
        guard let owned = routes.firstIndex(where: { $0 == "127.0.0.1:\(victim.port)" }) else {
            throw ExperimentError("member m0 owns no partition: nothing to fail over")
        }
        let p = Partitioning(count: partitions)
        let user = (0..<10_000).map { "user-\($0)" }.first { p.partition(of: $0) == owned }!
        let client = try WireClient(port: survivor.port)
        _ = try client.request(#"{"op":"hello"}"#)
        let killed = Date()
        victim.kill9()
        Log.info("failover: killed m0 (kill -9), owner of partition \(owned)")
        var i = 0
        while Date().timeIntervalSince(killed) < 120 {
            i += 1
            let reply = try client.request(#"{"op":"submit","app":"\#(app)","id":"failover-\#(i)","user":"\#(user)","title":"t"}"#, timeoutMilliseconds: 60_000)
            if reply["ok"] == true { return Date().timeIntervalSince(killed) }
            usleep(20_000)
        }
        throw ExperimentError("no ack on partition \(owned) within 120 s of the kill")
    }

    private func waitUntilServed(ports: [Int], partitions: Int) throws {
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            let routes = (try? Self.routes(port: ports[0])) ?? []
            // Balanced: every partition owned, and by as many members as there are (within one).
            let owners = Dictionary(grouping: routes.compactMap { $0 }, by: { $0 }).mapValues(\.count)
            if routes.count == partitions, routes.allSatisfy({ $0 != nil }), owners.count == min(ports.count, partitions),
               (owners.values.max() ?? 0) - (owners.values.min() ?? 0) <= 1 { return }
            usleep(100_000)
        }
        throw ExperimentError("the members did not share the partitions within 60 s")
    }

    static func routes(port: Int) throws -> [String?] {
        let c = try WireClient(port: port)
        return (try c.request(#"{"op":"hello"}"#)["routes"]?.arrayValue ?? []).map { $0["address"]?.stringValue }
    }
}
