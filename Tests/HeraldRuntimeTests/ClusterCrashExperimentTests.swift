// Issue 41, experiment 1 at suite size: three members, producers sending to any of them, one killed and one paused as a zombie.
import Foundation
import Glibc
import HeraldCore
import HeraldStore
import HeraldTestSupport
import HeraldWireTesting
import Synchronization
import Testing

@Suite(.serialized) struct ClusterCrashExperimentTests {
    /// Suite size; `HERALD_CLUSTER_EVENTS` and `HERALD_CLUSTER_PARTITIONS` give the full size (scripts/cluster-experiments).
    static let events = Int(ProcessInfo.processInfo.environment["HERALD_CLUSTER_EVENTS"] ?? "") ?? 6_000
    static let partitions = Int(ProcessInfo.processInfo.environment["HERALD_CLUSTER_PARTITIONS"] ?? "") ?? 8
    /// The zombie phase (a member paused past its lease) runs unless `HERALD_CLUSTER_ZOMBIE=0`.
    static let zombie = ProcessInfo.processInfo.environment["HERALD_CLUSTER_ZOMBIE"] != "0"

    struct Outcome {
        var report: ClusterChecker.Report
        var stats: ClusterLoad.Stats
        var replays: [Int32]
        var duplicatesAgreed: Bool
        var handoverSeconds: Double?
    }

    /// Runs the load on three members; kills one with SIGKILL once a fifth is sent, and pauses
    /// another with SIGSTOP for three lease TTLs (a zombie) once half is; then fires the deferred
    /// submits' timers with the clock op and checks the database.
    static func run(unsafeRouterAcks: Bool = false, gracefulStop: Bool = false, citus: Bool = false, zombie: Bool = false) throws -> Outcome {
        let ttl = gracefulStop ? 5.0 : 1.0
        let cluster = try TestCluster(partitions: partitions, ttlSeconds: ttl, citus: citus)
        cluster.environment = unsafeRouterAcks ? ["HERALD_UNSAFE_ROUTER_ACKS_FOR_TESTING": "97"] : [:]
        let extra: [String] = []
        let a = try cluster.start("a", extra: extra)
        try cluster.waitUntilEveryPartitionIsServed(via: a)
        let b = try cluster.start("b", extra: extra)
        let c = try cluster.start("c", extra: extra)
        try cluster.waitUntilEveryPartitionIsServed(via: c)
        var load = ClusterLoad()
        load.events = events
        // Paced so that the load runs about 8 s, through the kill and the pause.
        load.ratePerSecond = max(events / 8, 500)
        load.timeoutSeconds = 120
        let ports = [a.port, b.port, c.port]
        try load.prepare(ports: ports)
        let configured = load
        let result = Mutex<(acks: [Int: ClusterLoad.Ack], stats: ClusterLoad.Stats)?>(nil)
        let failure = Mutex<String?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            do {
                let outcome = try configured.run(ports: ports)
                result.withLock { $0 = outcome }
            } catch {
                failure.withLock { $0 = "the load did not complete: \(error)" }
            }
            done.signal()
        }
        var handover: Double?
        if gracefulStop {
            // A lame-duck stop of a under load: its partitions move at once, not after the 5 s lease.
            usleep(2_000_000)
            let stopped = Date()
            _ = a.terminate()
            try cluster.waitUntilEveryPartitionIsServed(via: c, seconds: 30) { routes in routes.allSatisfy { $0 != "127.0.0.1:\(a.port)" } }
            handover = Date().timeIntervalSince(stopped)
            print("cluster experiment: stopped a (SIGTERM); every partition served elsewhere \(Int(handover! * 1000)) ms later")
        } else {
            // Killing a member makes the others take its partitions over once its leases expire.
            usleep(700_000)
            a.kill9()
            print("cluster experiment: killed a (kill -9)")
            if zombie {
                usleep(2_500_000)
                kill(b.pid, SIGSTOP)
                print("cluster experiment: paused b (SIGSTOP) for \(3 * ttl) s")
                usleep(UInt32(3 * ttl * 1_000_000))
                kill(b.pid, SIGCONT)
                print("cluster experiment: resumed b (SIGCONT)")
            }
        }
        done.wait()
        guard let (acks, stats) = result.withLock({ $0 }) else { throw ExperimentError(failure.withLock { $0 } ?? "no result") }
        // Timers: the clock op moves every partition; its reply comes after all have fired.
        let live = try WireClient(port: c.port)
        _ = try live.request(#"{"op":"hello"}"#)
        let clock = try live.request(#"{"op":"clock","advanceTo":"2026-03-27T09:00:00Z"}"#, timeoutMilliseconds: 60_000)
        if clock["ok"] != true { throw ExperimentError("clock refused: \(clock)") }
        // Deliveries are appended after the ack: wait until every partition's writers are idle.
        usleep(1_000_000)
        // A re-sent submit is a duplicate with the position first acknowledged.
        var agreed = true
        for i in stride(from: 0, to: load.events, by: max(load.events / 50, 1)) {
            let again = try live.request(load.line(i), timeoutMilliseconds: 30_000)
            if let ack = acks[i], ack.seq > 0,
               again["duplicate"] != true || again["partition"]?.intValue != ack.partition || again["seq"]?.intValue != ack.seq {
                agreed = false
                print("re-sent \(i): \(again.canonicalString), first acked \(ack)")
            }
        }
        let report = try ClusterChecker.check(url: cluster.url, load: load, acks: acks, timersDue: true)
        var replays: [Int32] = []
        for p in 0..<partitions {
            replays.append(try HeraldCommandTests.herald(["replay", "--database-url", cluster.url, "--partition", String(p)]).status)
        }
        print("cluster experiment\(citus ? " on Citus" : "") (\(partitions) partitions, \(load.events) submits): \(stats)\n  \(report)\n  replays: \(replays)")
        for m in [b, c] { _ = m.terminate() }
        return Outcome(report: report, stats: stats, replays: replays, duplicatesAgreed: agreed, handoverSeconds: handover)
    }

    @Test func aKilledMemberAndAZombieLoseNothingAndEachNotificationIsDecidedOnce() throws {
        let outcome = try Self.run(zombie: Self.zombie)
        #expect(outcome.report.ok, "\(outcome.report)")
        #expect(outcome.stats.acked >= Self.events)
        #expect(outcome.report.timersFired == Self.events / 10)
        #expect(outcome.replays.allSatisfy { $0 == 0 }, "replay exit codes by partition: \(outcome.replays)")
        #expect(outcome.duplicatesAgreed)
    }

    /// Experiment 2: experiment 1 on Citus (a coordinator and two workers on loopback ports), where
    /// Citus is installed.
    @Test(.enabled(if: TestCitus.isInstalled, Comment(rawValue: TestCitus.missingReason ?? "")))
    func onCitusAKilledMemberAndAZombieLoseNothingAndEachNotificationIsDecidedOnce() throws {
        let outcome = try Self.run(citus: true, zombie: Self.zombie)
        #expect(outcome.report.ok, "\(outcome.report)")
        #expect(outcome.report.timersFired == Self.events / 10)
        #expect(outcome.replays.allSatisfy { $0 == 0 }, "replay exit codes by partition: \(outcome.replays)")
        #expect(outcome.duplicatesAgreed)
    }

    /// Experiment 4: a graceful stop under load — producers see nothing but `goodbye` (no refusal),
    /// nothing acknowledged is lost, and the partitions move without waiting for their leases.
    @Test func aGracefulStopUnderLoadLosesNothingAndHandsOverBeforeTheLeasesExpire() throws {
        let outcome = try Self.run(gracefulStop: true)
        #expect(outcome.report.ok, "\(outcome.report)")
        #expect(outcome.stats.refusedRetried == 0, "\(outcome.stats)")
        #expect(outcome.replays.allSatisfy { $0 == 0 })
        #expect(outcome.duplicatesAgreed)
        #expect((outcome.handoverSeconds ?? 99) < 5, "handover took \(outcome.handoverSeconds ?? -1) s; the lease is 5 s")
    }

    /// The control: members whose routers acknowledge some submits without forwarding them (a
    /// planted fault: an ack before the owner stored it); the checker finds every one of them lost.
    @Test func aRouterThatAcknowledgesWhatItNeverForwardedIsCaughtByTheChecker() throws {
        let outcome = try Self.run(unsafeRouterAcks: true)
        #expect(!outcome.report.ok)
        #expect(outcome.report.findings.contains { $0.hasPrefix("LOST") }, "\(outcome.report)")
    }
}
