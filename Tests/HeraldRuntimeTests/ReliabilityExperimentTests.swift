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

    // MARK: Experiment 6: the timing wheel across crashes

    /// Deferred submits over 10 minutes of manual-clock time (a tenth of them in the same tick);
    /// the service is killed while they are submitted and while the clock moves (some kills a few
    /// ms after a clock move was sent, mid-fire). Each decision must happen exactly once, at its
    /// deliverAt (never early, never late); after each restart the timers in memory (users with a
    /// wake-up) must equal the users with an undecided deferred submit in PostgreSQL.
    @Test func deferredDecisionsFireExactlyOnceAtTheirTimeAcrossKills() throws {
        let start = Instant(rfc3339: "2026-03-27T07:00:00Z")!
        var experiment = CrashExperiment()
        experiment.seed = 6
        experiment.load.events = ExperimentSize.int("HERALD_EXPERIMENT_EVENTS", 3_000)
        experiment.load.timeoutSeconds = max(600, Double(experiment.load.events) / 50)
        // 60 s … 660 s after the start, one second apart; every tenth at 300 s exactly.
        experiment.load.deliverAt = { i in start.adding(.seconds(i % 10 == 0 ? 300 : 60 + Int64(i % 600))) }
        let kills = ExperimentSize.int("HERALD_EXPERIMENT_KILLS", 4)
        let url = try TestPostgres.freshDatabase()
        var mismatches: [String] = []
        let outcome = try experiment.run(name: "timing wheel across \(kills) kills, \(experiment.load.events) deferred", databaseURL: url) { serve, recorder, finished, _ in
            var rng = SeededRandom(seed: 6)
            var notes: [String] = []
            // A kill while the deferred submits come in.
            while recorder.ackedCount < experiment.load.events / 2 && !finished() { usleep(1_000) }
            serve.kill9()
            try serve.start()
            while !finished() { usleep(10_000) }
            // The clock moves in 30 s steps to 11 minutes; kills land between and during moves.
            var killsLeft = kills - 1
            let steps = 22
            for step in 1...steps {
                let target = start.adding(.seconds(Int64(step) * 30))
                let midFire = killsLeft > 0 && step % (steps / max(1, kills - 1)) == 0
                if midFire {
                    // Send the move, kill a few ms later (perhaps mid-fire), restart, check, move again.
                    let c = try WireClient(port: serve.port)
                    _ = try c.request(#"{"op":"hello"}"#)
                    try c.send(#"{"op":"clock","advanceTo":"\#(target.rfc3339)"}"#)
                    usleep(UInt32.random(in: 0...20_000, using: &rng))
                    serve.kill9()
                    try serve.start()
                    killsLeft -= 1
                    // Start-up re-derives and commits what the crash left undecided: let that settle.
                    var (memory, stored, now) = try Self.pendingTimers(port: serve.port, url: url)
                    for _ in 0..<50 where memory != stored {
                        usleep(100_000)
                        (memory, stored, now) = try Self.pendingTimers(port: serve.port, url: url)
                    }
                    notes.append("kill during the move to \(target.rfc3339): after restart (clock at \(now)) \(memory) users with a timer in memory, \(stored) with an undecided deferred submit in PostgreSQL")
                    if memory != stored { mismatches.append(notes.last!) }
                }
                try Self.advance(port: serve.port, to: target)
            }
            return notes
        }
        #expect(outcome.passed, "\(outcome)")
        #expect(mismatches.isEmpty, "timers in memory match the pending deferred submits in PostgreSQL: \(mismatches)")
        #expect(outcome.report.decided == experiment.load.events)
    }

    /// Moves the manual clock, retrying through restarts; an instant already reached is fine.
    static func advance(port: Int, to target: Instant) throws {
        for _ in 0..<200 {
            if let c = try? WireClient(port: port), (try? c.request(#"{"op":"hello"}"#))?["ok"] == true,
               let r = try? c.request(#"{"op":"clock","advanceTo":"\#(target.rfc3339)"}"#, timeoutMilliseconds: 60_000),
               r["ok"] == true || r["error"]?["code"] == "clock_backwards" {
                return
            }
            usleep(50_000)
        }
        throw ExperimentError("could not move the manual clock to \(target.rfc3339)")
    }

    /// Users with a wake-up in the service's wheel, users with an undecided deferred submit in PostgreSQL, and the clock.
    static func pendingTimers(port: Int, url: String) throws -> (memory: Int64, stored: Int64, now: String) {
        let c = try WireClient(port: port)
        _ = try c.request(#"{"op":"hello"}"#)
        let stats = try c.request(#"{"op":"stats"}"#)
        let conn = try PGConnection.connect(url)
        defer { conn.close() }
        let r = try conn.execute("""
            SELECT count(DISTINCT e.user_id) FROM events e
            WHERE e.type = 'submit' AND e.body::jsonb ? 'deliverAt'
              AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.user_id = e.user_id AND d.app = e.app AND d.notification_id = e.notification_id)
            """)
        return (stats["timers"]?.intValue ?? -1, r.int64(0, 0) ?? -1, stats["now"]?.stringValue ?? "?")
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

    /// Acks before COMMIT, then `kill -9` while commits are held: a transaction of the test's own
    /// locks partition 0's row of `partitions`, so every event acknowledged after it took the lock is still uncommitted
    /// when the service dies. (A kill at a random moment, as experiment 1 does, can find everything
    /// acknowledged already committed, so a control built that way is not always flagged.)
    @Test func negativeControlAckBeforeCommitWithKillNineIsFlaggedAsLoss() throws {
        var experiment = CrashExperiment()
        experiment.acknowledgeBeforeCommit = true
        experiment.load.events = 3_000
        let url = try TestPostgres.freshDatabase()
        let outcome = try experiment.run(name: "kill9 with commits held [negative control: ack before commit]", databaseURL: url) { serve, recorder, finished, _ in
            while recorder.ackedCount < 500 && !finished() { usleep(1_000) }
            let admin = try PGConnection.connect(url)
            defer { admin.close() }
            try admin.execute("BEGIN")
            try admin.execute("SELECT seq FROM partitions WHERE partition = 0 FOR UPDATE")
            let held = recorder.ackedCount
            let deadline = Date().addingTimeInterval(30)
            while recorder.ackedCount < held + 300 && !finished() && Date() < deadline { usleep(1_000) }
            let acked = recorder.ackedCount
            serve.kill9()
            // The killed writer's transaction, waiting for the lock, goes on to a COPY whose data
            // never comes, and rolls back.
            try admin.execute("ROLLBACK")
            try serve.start()
            return ["kill -9 after \(acked) acks, \(acked - held) of them acknowledged while every commit was held"]
        }
        #expect(outcome.report.lost > 0, "the checker must flag acknowledged events lost with the killed process:\n\(outcome)")
        #expect(outcome.report.findings.contains { $0.verdict == .lost && $0.detail.contains("not stored") })
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
            // Bounded: a WAL writer stopped while it held WALWriteLock stalls every commit that
            // flushes (all of them with synchronous_commit on), and the acks stop coming.
            let stalled = Date().addingTimeInterval(10)
            while recorder.ackedCount < paused + 1_000 && !finished() && Date() < stalled { usleep(1_000) }
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
        // (Otherwise it would stay undecided until a restart: the checker's "stored but never decided".)
        let d = try? consumer.deliveries(1, timeoutMilliseconds: 5_000).first
        #expect(d?["notification"] == "n-cut" && d?["causeSeq"]?.intValue == storedSeq, "the committed event is decided")
        let report = try recorder.history(from: url).check()
        print("commit outcome unknown: \(report.summary)")
        #expect(report.passed, "\(report)")
    }
}
