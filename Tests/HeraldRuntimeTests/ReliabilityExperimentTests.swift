// The reliability experiments of docs/reliability.md, small enough for CI, and their negative controls.
import Foundation
import Glibc
import HeraldCore
import HeraldRuntime
import HeraldStore
import HeraldTestSupport
import Synchronization
import Testing

/// Sizes come from the environment so `scripts/experiment` can run the long versions:
/// HERALD_EXPERIMENT_EVENTS, HERALD_EXPERIMENT_KILLS, HERALD_EXPERIMENT_RUNS, HERALD_EXPERIMENT_OUTAGE_SECONDS.
enum ExperimentSize {
    static func int(_ name: String, _ fallback: Int) -> Int {
        ProcessInfo.processInfo.environment[name].flatMap(Int.init) ?? fallback
    }
}

/// A private cluster for experiments that crash PostgreSQL (the shared test cluster must live on).
final class PrivateCluster {
    let cluster: LocalCluster
    let folder: String
    init() throws {
        folder = FileManager.default.temporaryDirectory.path + "/herald-crash-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        cluster = try LocalCluster(dataDirectory: folder + "/pgdata")
        try cluster.start()
    }
    var url: String { cluster.connectionString() }
    func destroy() { cluster.kill(); try? FileManager.default.removeItem(atPath: folder) }
}

@Suite(.serialized) struct ReliabilityExperimentTests {
    // MARK: Experiment 1: kill -9 of the service

    @Test func killNineUnderPipelinedLoadLosesNoAcknowledgedEventAndReplayAgrees() throws {
        var experiment = CrashExperiment()
        experiment.load.events = ExperimentSize.int("HERALD_EXPERIMENT_EVENTS", 5_000)
        experiment.load.timeoutSeconds = max(600, Double(experiment.load.events) / 50)
        let kills = ExperimentSize.int("HERALD_EXPERIMENT_KILLS", 3)
        for run in 1...ExperimentSize.int("HERALD_EXPERIMENT_RUNS", 1) {
            experiment.seed = UInt64(run)
            let outcome = try experiment.killNine(databaseURL: TestPostgres.freshDatabase(), kills: kills)
            #expect(outcome.passed, "\(outcome)")
            #expect(outcome.report.acked == experiment.load.events && outcome.load.reconnects > 0)
        }
    }

    // MARK: Experiment 7: consumers crashed together with the service

    @Test func consumersCrashedWithTheServiceReceiveEveryDeliveryAtLeastOnceInOrder() throws {
        var experiment = CrashExperiment()
        experiment.consumers = ["push", "inbox", "mail"]
        experiment.crashConsumersWithService = true
        experiment.seed = 7
        experiment.load.events = ExperimentSize.int("HERALD_EXPERIMENT_EVENTS", 3_000)
        experiment.load.timeoutSeconds = max(600, Double(experiment.load.events) / 50)
        let outcome = try experiment.killNine(databaseURL: TestPostgres.freshDatabase(), kills: ExperimentSize.int("HERALD_EXPERIMENT_KILLS", 3))
        #expect(outcome.passed, "\(outcome)")
        #expect(outcome.report.delivered.values.allSatisfy { $0 == outcome.report.decided } && outcome.report.delivered.count == 3)
    }

    // MARK: Experiment 2: PostgreSQL crashed and restarted under load

    @Test func postgresCrashUnderLoadAcksNothingUncommittedAndResumes() throws {
        let pg = try PrivateCluster()
        defer { pg.destroy() }
        var experiment = CrashExperiment()
        experiment.load.events = ExperimentSize.int("HERALD_EXPERIMENT_EVENTS", 4_000)
        experiment.load.timeoutSeconds = max(600, Double(experiment.load.events) / 50)
        let seconds = Double(ExperimentSize.int("HERALD_EXPERIMENT_OUTAGE_SECONDS", 2))
        let outcome = try experiment.postgresCrash(cluster: pg.cluster, databaseURL: pg.url, outageSeconds: seconds)
        #expect(outcome.passed, "\(outcome)")
        #expect(outcome.load.unavailable > 0, "producers were told store_unavailable during the outage")
        #expect(outcome.report.acked == experiment.load.events)
    }

    // MARK: Negative controls: the checker must see loss

    @Test func negativeControlAckBeforeCommitWithAPostgresCrashIsFlaggedAsLoss() throws {
        let pg = try PrivateCluster()
        defer { pg.destroy() }
        var experiment = CrashExperiment()
        experiment.acknowledgeBeforeCommit = true
        experiment.load.events = 3_000
        let outcome = try experiment.postgresCrash(cluster: pg.cluster, databaseURL: pg.url, outageSeconds: 1)
        #expect(!outcome.report.passed && outcome.report.lost > 0, "the checker must flag the acknowledged events the crash lost:\n\(outcome)")
        #expect(outcome.report.findings.contains { $0.verdict == .lost && $0.detail.contains("not stored") })
    }

    @Test func negativeControlAckBeforeCommitWithKillNineIsFlaggedAsLoss() throws {
        var experiment = CrashExperiment()
        experiment.acknowledgeBeforeCommit = true
        experiment.load.events = 3_000
        let outcome = try experiment.killNine(databaseURL: TestPostgres.freshDatabase(), kills: 2)
        #expect(outcome.report.lost > 0, "the checker must flag acknowledged events lost with the killed process:\n\(outcome)")
    }

    /// `synchronous_commit = off` (served only with --unsafe-durability) and a PostgreSQL crash.
    /// An async commit is acknowledged before its WAL is written; the WAL writer writes it within
    /// `wal_writer_delay`. To make the loss window wide and the run deterministic, the WAL writer
    /// is paused (SIGSTOP) for part of the load and then the server crashes (SIGKILL of the WAL
    /// writer, which makes the postmaster reset shared memory, then `pg_ctl stop -m immediate`).
    /// The same procedure with synchronous_commit on loses nothing: each commit flushes its own WAL.
    @Test(arguments: [false, true])
    func synchronousCommitOffAndAPostgresCrashLosesAcknowledgedEventsAndTheCheckerSaysSo(asynchronous: Bool) throws {
        let pg = try PrivateCluster()
        defer { pg.destroy() }
        let admin = try PGConnection.connect(pg.url)
        if asynchronous {
            try admin.execute("ALTER SYSTEM SET synchronous_commit = off")
            try admin.execute("SELECT pg_reload_conf()")
        }
        let walWriter = try #require(admin.execute("SELECT pid FROM pg_stat_activity WHERE backend_type = 'walwriter'").int64(0, 0))
        admin.close()
        var experiment = CrashExperiment()
        experiment.extraServeArguments = ["--unsafe-durability"]
        experiment.load.events = 3_000
        let outcome = try experiment.run(name: "synchronous_commit=\(asynchronous ? "off" : "on") + PostgreSQL crash", databaseURL: pg.url) { serve, recorder, finished, _ in
            while recorder.ackedCount < 500 && !finished() { usleep(1_000) }
            kill(pid_t(walWriter), SIGSTOP)
            let paused = recorder.ackedCount
            while recorder.ackedCount < paused + 1_000 && !finished() { usleep(1_000) }
            let acked = recorder.ackedCount
            kill(pid_t(walWriter), SIGKILL)
            pg.cluster.kill()
            serve.kill9()   // its memory is ahead of what PostgreSQL kept; a restart folds what is there
            try pg.cluster.start()
            try serve.start()
            return ["WAL writer paused after \(paused) acks; PostgreSQL crashed after \(acked) acks"]
        }
        if asynchronous {
            #expect(outcome.report.lost > 0, "with synchronous_commit=off the crash lost acknowledged commits, and the checker must say so")
        } else {
            #expect(outcome.report.passed, "with synchronous_commit=on nothing acknowledged is lost:\n\(outcome)")
        }
    }

    // MARK: Experiment 3: commit outcome unknown

    @Test func commitOutcomeUnknownIsNotAcknowledgedAndTheRetryIsADuplicateWithTheOriginalSeq() throws {
        let url = try TestPostgres.freshDatabase()
        let cut = Atomic<Bool>(false)
        let server = try TestServer(url: url) { config in
            config.commitFlushedForTesting = { socket, eventRows in
                guard eventRows > 0, cut.compareExchange(expected: true, desired: false, ordering: .relaxed).exchanged else { return false }
                // Wait until PostgreSQL has committed (seen from another connection), then cut the
                // connection before the COMMIT's reply is read: the service cannot know the outcome.
                if let probe = try? PGConnection.connect(url) {
                    for _ in 0..<500 {
                        if (try? probe.execute("SELECT 1 FROM events WHERE notification_id = 'n-cut'").rowCount) == 1 { break }
                        usleep(10_000)
                    }
                    probe.close()
                }
                shutdown(socket, Int32(SHUT_RDWR))
                return true
            }
        }
        defer { server.stop() }
        let c = try server.client()
        try ServiceTests.setUpAlice(c)
        let consumer = try server.client()
        #expect(try consumer.call(["op": "subscribe", "consumer": "push", "from": "earliest"])["ok"] == true)

        let recorder = HistoryRecorder(consumers: [])
        let key = HistoryChecker.Key(app: ServiceTests.mail, id: "n-cut", user: "alice")
        recorder.sent(key, payload: "World")
        cut.store(true, ordering: .relaxed)
        let first = try c.call(ServiceTests.submit("n-cut"))
        #expect(first["ok"] != true, "no acknowledgement when the commit's outcome is unknown: \(first.canonicalString)")
        #expect(first["error"]?["code"] == "store_unavailable")

        var retry: JSONValue = .null
        for _ in 0..<100 {
            retry = try c.call(ServiceTests.submit("n-cut"))
            if retry["error"]?["code"] != "store_unavailable" { break }
            usleep(50_000)
        }
        let conn = try PGConnection.connect(url)
        let storedSeq = try #require(conn.execute("SELECT seq FROM events WHERE notification_id = 'n-cut'").int64(0, 0))
        #expect(retry["ok"] == true && retry["duplicate"] == true && retry["seq"]?.intValue == storedSeq,
                "the retry is answered as a duplicate with the original seq \(storedSeq): \(retry.canonicalString)")
        recorder.acked(key, seq: retry["seq"]?.intValue ?? 0, duplicate: retry["duplicate"] == true)

        // The committed event is decided once, even though the service never saw its COMMIT reply.
        // (Before the fix, it stayed undecided until a restart: the checker said "stored but never decided".)
        let d = try? consumer.deliveries(1, timeoutMilliseconds: 5_000).first
        #expect(d?["notification"] == "n-cut" && d?["causeSeq"]?.intValue == storedSeq, "the committed event is decided")
        let report = try recorder.history(from: url).check()
        print("commit outcome unknown: \(report.summary)")
        #expect(report.passed, "\(report)")
    }
}
