// SPEC §9 with several `herald serve --instance` processes on one database: routing, fan-out, direct routes, consumers, handover.
import Foundation
import Glibc
import HeraldCore
import HeraldTestSupport
import HeraldWireTesting
import Testing

/// Members of one cluster, each a real `herald serve --instance` process on loopback.
final class TestCluster {
    let url: String
    let partitions: Partitioning
    var members: [String: ServeProcess] = [:]
    let ttlSeconds: Double
    /// Environment given to the members started from now on.
    var environment: [String: String] = [:]

    /// A fresh database of `partitions` partitions: on plain PostgreSQL, or (`citus`) distributed
    /// over a Citus coordinator and two workers.
    init(partitions: Int, ttlSeconds: Double = 1, citus: Bool = false) throws {
        if citus {
            url = try TestCitus.freshDatabase(migrated: true, partitions: partitions)
        } else {
            url = try TestPostgres.freshDatabase()
            let set = try HeraldCommandTests.herald(["migrate", "--database-url", url, "--partitions", String(partitions)])
            guard set.status == 0 else { throw ExperimentError("migrate --partitions failed: \(set)") }
        }
        self.partitions = Partitioning(count: partitions)
        self.ttlSeconds = ttlSeconds
    }

    deinit { for m in members.values { m.kill9() } }

    @discardableResult
    func start(_ name: String, extra: [String] = []) throws -> ServeProcess {
        let log = FileManager.default.temporaryDirectory.path + "/herald-cluster-\(getpid())-\(name)-\(UInt32.random(in: 0...UInt32.max)).log"
        let member = try ServeProcess(databaseURL: url, logPath: log,
                                      extraArguments: ["--instance", name, "--lease-ttl", String(ttlSeconds)] + extra)
        for (k, v) in environment { member.environmentChanges[k] = v }
        try member.start()
        members[name] = member
        return member
    }

    /// hello's routes from `member`: each partition's owner address (nil while it has none).
    func routes(via member: ServeProcess) throws -> [String?] {
        let c = try WireClient(port: member.port)
        let hello = try c.request(#"{"op":"hello"}"#)
        return (hello["routes"]?.arrayValue ?? []).map { $0["address"]?.stringValue }
    }

    /// Waits until every partition has a live owner that `member` knows of; returns the routes.
    @discardableResult
    func waitUntilEveryPartitionIsServed(via member: ServeProcess, seconds: Double = 30,
                                         where condition: ([String?]) -> Bool = { _ in true }) throws -> [String?] {
        let deadline = Date().addingTimeInterval(seconds)
        var last: [String?] = []
        while Date() < deadline {
            last = (try? routes(via: member)) ?? []
            if last.count == partitions.count, last.allSatisfy({ $0 != nil }), condition(last),
               let served = try? served(by: member), Set(served).isSuperset(of: Set(last.enumerated().filter { $0.element == "127.0.0.1:\(member.port)" }.map(\.offset))) {
                return last
            }
            usleep(50_000)
        }
        throw ExperimentError("not every partition is served after \(seconds) s: routes \(last)\n\(member.tail())")
    }

    /// Waits until `member` sees the partitions spread over its owners as `shares` (sorted), so
    /// that no partition moves while a test looks.
    func waitUntilBalanced(via member: ServeProcess, _ shares: [Int]) throws {
        try waitUntilEveryPartitionIsServed(via: member) { routes in
            Dictionary(grouping: routes.compactMap { $0 }, by: { $0 }).values.map(\.count).sorted() == shares
        }
    }

    /// The partitions `member` serves itself (its router's `stats`).
    func served(by member: ServeProcess) throws -> [Int] {
        let c = try WireClient(port: member.port)
        _ = try c.request(#"{"op":"hello"}"#)
        return (try c.request(#"{"op":"stats"}"#)["served"]?.arrayValue ?? []).compactMap(\.intValue).map(Int.init)
    }

    /// A client of `member` that said hello, with the app registered and `users` authorized.
    func producer(via member: ServeProcess, users: [String]) throws -> WireClient {
        let c = try WireClient(port: member.port)
        _ = try c.request(#"{"op":"hello"}"#)
        try Self.prepared(c, users: users)
        return c
    }

    static func prepared(_ c: WireClient, users: [String]) throws {
        #expect(try c.request(#"{"op":"registerApp","app":"com.example.cluster","entitlements":[]}"#)["ok"] == true)
        for u in users {
            #expect(try c.request(#"{"op":"authorization","user":"\#(u)","app":"com.example.cluster","status":"authorized","options":["alert","sound","badge"]}"#)["ok"] == true)
        }
    }
}

@Suite(.serialized) struct ClusterTests {
    @Test func anyMemberAnswersForEveryPartitionWithTheUsersPartitionInTheAck() throws {
        let cluster = try TestCluster(partitions: 4)
        let a = try cluster.start("a")
        let b = try cluster.start("b")
        try cluster.waitUntilEveryPartitionIsServed(via: a)
        try cluster.waitUntilEveryPartitionIsServed(via: b)
        let users = (0..<16).map { "user-\($0)" }
        let ca = try WireClient(port: a.port), cb = try WireClient(port: b.port)
        _ = try ca.request(#"{"op":"hello"}"#)
        _ = try cb.request(#"{"op":"hello"}"#)
        try TestCluster.prepared(ca, users: users)
        var seqs: [Int: [Int64]] = [:]
        for (i, u) in users.enumerated() {
            let c = i % 2 == 0 ? ca : cb
            let ack = try c.request(#"{"op":"submit","app":"com.example.cluster","id":"n\#(i)","user":"\#(u)","title":"Hello"}"#)
            #expect(ack["ok"] == true, "\(ack)")
            #expect(ack["partition"]?.intValue == Int64(cluster.partitions.partition(of: u)), "\(u): \(ack)")
            seqs[cluster.partitions.partition(of: u), default: []].append(ack["seq"]?.intValue ?? 0)
            // The same id again, through the other member: the stored position.
            let again = try (c === ca ? cb : ca).request(#"{"op":"submit","app":"com.example.cluster","id":"n\#(i)","user":"\#(u)","title":"Hello"}"#)
            #expect(again["duplicate"] == true && again["seq"] == ack["seq"] && again["partition"] == ack["partition"], "\(again)")
        }
        for (_, list) in seqs { #expect(list == list.sorted() && Set(list).count == list.count) }
    }

    @Test func aFanOutAcrossPartitionsIsOneAckAfterEveryPartitionCommitted() throws {
        let cluster = try TestCluster(partitions: 4)
        let a = try cluster.start("a")
        try cluster.waitUntilEveryPartitionIsServed(via: a)
        let users = (0..<12).map { "fan-\($0)" }
        let c = try cluster.producer(via: a, users: users)
        let list = users.map { "\"\($0)\"" }.joined(separator: ",")
        let ack = try c.request(#"{"rid":5,"op":"submit","app":"com.example.cluster","id":"fan","users":[\#(list)],"title":"All"}"#)
        #expect(ack["ok"] == true && ack["rid"] == 5 && ack["events"] == 12 && ack["appended"] == 12, "\(ack)")
        let parts = ack["partitions"]?.arrayValue ?? []
        #expect(parts.count == Set(users.map(cluster.partitions.partition(of:))).count && parts.count > 1, "\(ack)")
        let again = try c.request(#"{"op":"submit","app":"com.example.cluster","id":"fan","users":[\#(list)],"title":"All"}"#)
        #expect(again["duplicate"] == true && again["appended"] == 0, "\(again)")
        // Every recipient got its decision, each in its own partition's log.
        let consumer = try WireClient(port: a.port)
        _ = try consumer.request(#"{"op":"hello"}"#)
        #expect(try consumer.request(#"{"op":"subscribe","consumer":"fan","from":"earliest"}"#)["ok"] == true)
        var seen: [String: Int] = [:]
        while seen.count < users.count {
            let line = try consumer.readJSON()
            if line["op"] == "delivery", line["notification"] == "fan", let u = line["user"]?.stringValue {
                #expect(line["partition"]?.intValue == Int64(cluster.partitions.partition(of: u)))
                seen[u, default: 0] += 1
            }
        }
        #expect(seen.values.allSatisfy { $0 == 1 })
    }

    @Test func aDirectRouteToAMemberThatDoesNotOwnThePartitionIsToldTheOwnersAddress() throws {
        let cluster = try TestCluster(partitions: 2)
        let a = try cluster.start("a")
        try cluster.waitUntilEveryPartitionIsServed(via: a)
        let b = try cluster.start("b")
        // Balanced: one partition each.
        let routes = try cluster.waitUntilEveryPartitionIsServed(via: b) { Set($0).count == 2 }
        let user = "direct-user"
        let ownerPort = Int(routes[cluster.partitions.partition(of: user)]!.split(separator: ":").last!)!
        let (other, owning) = ownerPort == a.port ? (b, a) : (a, b)
        let c = try cluster.producer(via: other, users: [user])
        let refused = try c.request(#"{"rid":1,"op":"submit","app":"com.example.cluster","id":"d1","user":"\#(user)","title":"x","route":"direct"}"#)
        #expect(refused["error"]?["code"] == "not_owner" && refused["rid"] == 1, "\(refused)")
        #expect(refused["error"]?["address"]?.stringValue == routes[cluster.partitions.partition(of: user)], "\(refused)")
        // At the owner, the same request is stored.
        let owner = try WireClient(port: owning.port)
        _ = try owner.request(#"{"op":"hello"}"#)
        let stored = try owner.request(#"{"op":"submit","app":"com.example.cluster","id":"d1","user":"\#(user)","title":"x","route":"direct"}"#)
        #expect(stored["ok"] == true && stored["duplicate"] == nil, "\(stored)")
    }

    @Test func aSubscriberOnAnyMemberGetsEveryPartitionInCursorOrderAndAcksEach() throws {
        let cluster = try TestCluster(partitions: 4)
        let a = try cluster.start("a")
        try cluster.waitUntilEveryPartitionIsServed(via: a)
        let b = try cluster.start("b")
        // Balanced (two partitions each), so that no partition moves while the stream is checked.
        try cluster.waitUntilBalanced(via: b, [2, 2])
        let users = (0..<20).map { "sub-\($0)" }
        let p = try cluster.producer(via: a, users: users)
        for (i, u) in users.enumerated() {
            #expect(try p.request(#"{"op":"submit","app":"com.example.cluster","id":"s\#(i)","user":"\#(u)","title":"t"}"#)["ok"] == true)
        }
        let consumer = try WireClient(port: b.port)
        _ = try consumer.request(#"{"op":"hello"}"#)
        let subscribed = try consumer.request(#"{"op":"subscribe","consumer":"audit","from":"earliest"}"#)
        #expect(subscribed["ok"] == true && subscribed["partitions"]?.arrayValue?.count == 4, "\(subscribed)")
        var last: [Int64: Int64] = [:]
        var notifications = Set<String>()
        while notifications.count < users.count {
            let line = try consumer.readJSON()
            guard line["op"] == "delivery", let part = line["partition"]?.intValue, let cursor = line["cursor"]?.intValue else { continue }
            #expect(cursor == (last[part] ?? 0) + 1, "partition \(part): cursor \(cursor) after \(last[part] ?? 0)")
            last[part] = cursor
            if let n = line["notification"]?.stringValue { notifications.insert(n) }
        }
        // Each partition's cursor is acked on its own; the lag view agrees.
        for (part, cursor) in last {
            try consumer.sendRaw(Array(#"{"op":"ack","consumer":"audit","partition":\#(part),"cursor":\#(cursor)}"#.utf8) + [0x0A])
        }
        var acked = 0
        while acked < last.count {
            let line = try consumer.readJSON()
            if line["op"] != "delivery" { #expect(line["ok"] == true, "\(line)"); acked += 1 }
        }
        let admin = try WireClient(port: a.port)
        _ = try admin.request(#"{"op":"hello"}"#)
        let list = try admin.request(#"{"op":"consumers"}"#)
        let audit = list["consumers"]?.arrayValue?.first { $0["consumer"] == "audit" }
        #expect(audit?["lag"] == 0 && audit?["partitions"]?.arrayValue?.count == 4, "\(list)")
    }

    @Test func aGracefulStopHandsEveryPartitionOverWithoutWaitingForTheLease() throws {
        let cluster = try TestCluster(partitions: 4, ttlSeconds: 5)
        let a = try cluster.start("a")
        try cluster.waitUntilEveryPartitionIsServed(via: a)
        let b = try cluster.start("b")
        try cluster.waitUntilEveryPartitionIsServed(via: b)
        let users = (0..<8).map { "handover-\($0)" }
        let c = try cluster.producer(via: b, users: users)
        let stopped = Date()
        #expect(a.terminate())
        try cluster.waitUntilEveryPartitionIsServed(via: b, seconds: 4) { routes in routes.allSatisfy { $0 == "127.0.0.1:\(b.port)" } }
        let took = Date().timeIntervalSince(stopped)
        #expect(took < 4, "handover took \(took) s (the lease is 5 s)")
        for (i, u) in users.enumerated() {
            let ack = try c.request(#"{"op":"submit","app":"com.example.cluster","id":"h\#(i)","user":"\#(u)","title":"t"}"#)
            #expect(ack["ok"] == true, "\(ack)")
        }
        print("graceful handover of 4 partitions: \(Int(took * 1000)) ms from SIGTERM to every route on the survivor")
    }

    /// SPEC §9, operators across partitions: replay covers each partition alone, explain, state and
    /// pending find a user in whichever partition it lives, and export refuses a partitioned log
    /// with a clear error instead of half exporting it.
    /// `--http` on a member: its own series (partitions held, forwarding, the process) and each
    /// partition's, labelled `partition`; a handed-over partition's gauges leave with it; promtool
    /// accepts the exposition.
    @Test func aMemberServesMetricsForItselfAndEachPartitionItHolds() throws {
        let cluster = try TestCluster(partitions: 4)
        let httpPort = LocalClusterPort.free()
        let a = try cluster.start("a", extra: ["--http", "127.0.0.1:\(httpPort)"])
        try cluster.waitUntilEveryPartitionIsServed(via: a)
        let users = (0..<12).map { "metrics-\($0)" }
        let c = try cluster.producer(via: a, users: users)
        for (i, u) in users.enumerated() {
            #expect(try c.request(#"{"op":"submit","app":"com.example.cluster","id":"m\#(i)","user":"\#(u)","title":"t"}"#)["ok"] == true)
        }
        let ready = try MetricsEndpointTests.get(httpPort, "/readyz")
        #expect(ready.status == 200 && ready.body == "ready\n", "\(ready)")
        // Each partition publishes every second.
        var text = ""
        let deadline = Date().addingTimeInterval(10)
        repeat {
            usleep(200_000)
            text = try MetricsEndpointTests.get(httpPort, "/metrics").body
        } while (0..<4).map({ MetricsEndpointTests.sample(text, #"herald_events_appended_total{partition="\#($0)"}"#) ?? 0 }).reduce(0, +) < 12
            && Date() < deadline
        let perPartition = (0..<4).map { MetricsEndpointTests.sample(text, #"herald_events_appended_total{partition="\#($0)"}"#) ?? 0 }
        // Each user's authorization and submit, plus the app's registration in every partition.
        #expect(perPartition.reduce(0, +) == Double(2 * users.count + 4), "\(text)")
        #expect(MetricsEndpointTests.sample(text, "herald_partitions_owned") == 4 && MetricsEndpointTests.sample(text, "herald_partitions") == 4)
        #expect((MetricsEndpointTests.sample(text, "herald_router_forwarded_total") ?? 0) >= Double(2 * users.count), "\(text)")
        #expect((MetricsEndpointTests.sample(text, #"herald_request_duration_seconds_count{op="submit"}"#) ?? 0) == Double(users.count))
        #expect((MetricsEndpointTests.sample(text, #"herald_lease_epoch{partition="3"}"#) ?? 0) >= 1)
        #expect(MetricsEndpointTests.sample(text, #"herald_ready{partition="0"}"#) == 1)
        #expect(MetricsEndpointTests.sample(text, "process_open_fds") != nil)
        if PrometheusScrapeTests.promtool != nil {
            let lint = try PrometheusScrapeTests.promtool(["check", "metrics"], stdin: text)
            #expect(lint.status == 0, "promtool check metrics: \(lint.stdout)\(lint.stderr)")
        }

        let b = try cluster.start("b")
        try cluster.waitUntilBalanced(via: b, [2, 2])
        let served = Set(try cluster.served(by: a))
        let after = try MetricsEndpointTests.get(httpPort, "/metrics").body
        #expect(MetricsEndpointTests.sample(after, "herald_partitions_owned") == 2)
        for p in 0..<4 {
            let gauge = MetricsEndpointTests.sample(after, #"herald_ready{partition="\#(p)"}"#)
            #expect(served.contains(p) ? gauge == 1 : gauge == nil, "partition \(p): \(String(describing: gauge))")
            #expect(MetricsEndpointTests.sample(after, #"herald_events_appended_total{partition="\#(p)"}"#) == perPartition[p], "counters stay")
        }
    }

    /// SIGHUP on a member reads its tokens file again: a removed token's connection is told
    /// `grant_revoked` and closed, a new one is granted, and requests still reach every partition.
    @Test func sighupOnAMemberReloadsItsTokens() throws {
        let path = TokenReloadTests.tokensPath()
        defer { unlink(path) }
        let ops = TokenReloadTests.entry("ops", "ops-secret-token", roles: ["admin", "producer", "settings"], apps: ["com.example.cluster"])
        let old = TokenReloadTests.entry("old", "old-secret-token", roles: ["producer"], apps: ["com.example.cluster"])
        try TokenReloadTests.file([ops, old]).write(toFile: path, atomically: true, encoding: .utf8)
        let cluster = try TestCluster(partitions: 4)
        let a = try cluster.start("a", extra: ["--tokens", path])
        let admin = try WireClient(port: a.port)
        #expect(try admin.request(#"{"op":"hello","token":"ops-secret-token"}"#)["ok"] == true)
        let deadline = Date().addingTimeInterval(30)
        while try admin.request(#"{"op":"hello","token":"ops-secret-token"}"#)["routes"]?.arrayValue?.contains(where: { $0["address"] == .null }) != false,
              Date() < deadline { usleep(50_000) }
        let before = try WireClient(port: a.port)
        #expect(try before.request(#"{"op":"hello","token":"old-secret-token"}"#)["ok"] == true)

        let new = TokenReloadTests.entry("new", "new-secret-token", roles: ["producer"], apps: ["com.example.cluster"])
        try TokenReloadTests.file([ops, new]).write(toFile: path, atomically: true, encoding: .utf8)
        Glibc.kill(a.pid, SIGHUP)
        #expect(try before.readJSON()["error"]?["code"] == "grant_revoked")
        let after = try WireClient(port: a.port)
        #expect(try after.request(#"{"op":"hello","token":"new-secret-token"}"#)["ok"] == true)
        #expect(try admin.request(#"{"op":"registerApp","app":"com.example.cluster","entitlements":[]}"#)["ok"] == true,
                "a fan-out to every partition through the internal token still works")
        let refused = try WireClient(port: a.port)
        #expect(try refused.request(#"{"op":"hello","token":"old-secret-token"}"#)["error"]?["code"] == "invalid_token")
    }

    @Test func operatorCommandsCoverEveryPartition() throws {
        let cluster = try TestCluster(partitions: 4)
        let a = try cluster.start("a")
        try cluster.waitUntilEveryPartitionIsServed(via: a)
        let users = (0..<8).map { "op-\($0)" }
        let c = try cluster.producer(via: a, users: users)
        for (i, u) in users.enumerated() {
            #expect(try c.request(#"{"op":"submit","app":"com.example.cluster","id":"o\#(i)","user":"\#(u)","title":"t","deliverAt":"2026-03-27T09:00:00Z"}"#)["ok"] == true)
        }
        let far = users.first { cluster.partitions.partition(of: $0) != 0 }!
        let farIndex = users.firstIndex(of: far)!
        let replay = try HeraldCommandTests.herald(["replay", "--database-url", cluster.url])
        #expect(replay.status == 0 && replay.stdout.contains("partition 3:"), "\(replay)")
        let one = try HeraldCommandTests.herald(["replay", "--database-url", cluster.url, "--partition", "9"])
        #expect(one.status != 0 && one.stderr.contains("--partition 9"), "\(one)")
        let explain = try HeraldCommandTests.herald(["explain", "--database-url", cluster.url, "com.example.cluster", "o\(farIndex)"])
        #expect(explain.status == 0 && explain.stdout.contains(far), "\(explain)")
        let state = try HeraldCommandTests.herald(["state", "--database-url", cluster.url, far, "--json"])
        #expect(state.status == 0 && state.stdout.contains("o\(farIndex)"), "\(state)")
        let pending = try HeraldCommandTests.herald(["pending", "--database-url", cluster.url])
        #expect(pending.status == 0 && users.allSatisfy { pending.stdout.contains($0) }, "\(pending)")
        // Export and import carry every partition: the copy (a fresh database of one partition
        // takes the export's four) replays each partition and exports the same bytes.
        let export = try HeraldCommandTests.herald(["export", "--database-url", cluster.url])
        #expect(export.status == 0 && export.stdout.hasPrefix(#"{"partitions":{"count":4,"hash":"fnv1a64"}}"#), "\(export.stderr)")
        let copy = try TestPostgres.freshDatabase()
        let imported = try HeraldCommandTests.herald(["import", "--database-url", copy], input: export.stdout)
        #expect(imported.status == 0, "\(imported)")
        for p in 0..<4 {
            let replayed = try HeraldCommandTests.herald(["replay", "--database-url", copy, "--partition", String(p)])
            #expect(replayed.status == 0, "partition \(p): \(replayed)")
        }
        let again = try HeraldCommandTests.herald(["export", "--database-url", copy])
        #expect(again.status == 0 && again.stdout == export.stdout, "the copy exports the same bytes")
        let two = try HeraldCommandTests.herald(["export", "--database-url", cluster.url, "--partition", "2"])
        let lines = two.stdout.split(separator: "\n").dropFirst().dropLast()
        #expect(two.status == 0 && !lines.isEmpty && lines.allSatisfy { $0.contains(#""partition":2"#) }, "\(two)")
        let nine = try HeraldCommandTests.herald(["export", "--database-url", cluster.url, "--partition", "9"])
        #expect(nine.status != 0 && nine.stderr.contains("--partition 9") && nine.stdout.isEmpty, "\(nine)")
        let into = try HeraldCommandTests.herald(["import", "--database-url", copy], input: export.stdout)
        #expect(into.status != 0 && into.stderr.contains("already holds events"), "\(into)")
    }
}
