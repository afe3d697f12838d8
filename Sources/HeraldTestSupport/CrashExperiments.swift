// Experiments 1 and 2 of docs/reliability.md: kill -9 of the service, and a PostgreSQL crash, under pipelined load.
import Foundation
import Glibc
import HeraldCore
import HeraldStore

/// What one experiment run measured, and the checker's verdict.
public struct ExperimentOutcome: Sendable, CustomStringConvertible {
    public var name: String
    public var report: HistoryChecker.Report
    public var load: ResendingLoad.Stats
    /// `herald replay`'s exit status (0: the stored deliveries are reproduced byte for byte), if run.
    public var replayStatus: Int32?
    public var replayOutput = ""
    /// Extra measurements (kills, outage, memory, time to first ack), one line each.
    public var notes: [String] = []

    public var passed: Bool { report.passed && (replayStatus ?? 0) == 0 }
    public var description: String {
        var lines = ["\(name): \(passed ? "PASS" : "FAIL")", "  load: \(load)"]
        lines += notes.map { "  \($0)" }
        if let replayStatus { lines.append("  herald replay: exit \(replayStatus) — \(replayOutput.split(separator: "\n").last ?? "")") }
        lines.append("  " + report.text(limit: 10).replacingOccurrences(of: "\n", with: "\n  "))
        return lines.joined(separator: "\n")
    }
}

/// The shared shape: a real `herald serve` child process on `databaseURL`, the resending load,
/// one durable consumer; `disrupt` does the damage while the load runs; then every delivery is
/// awaited, the service stopped, `herald replay` run and the history checked.
public struct CrashExperiment: Sendable {
    public var load = ResendingLoad()
    public var seed: UInt64 = 8
    /// The negative control: the service acknowledges before COMMIT (the checker must fail).
    public var acknowledgeBeforeCommit = false
    public var extraServeArguments: [String] = []
    /// Durable consumers, each on its own connection and thread.
    public var consumers = ["audit"]
    /// Experiment 7: each kill of the service also crashes every consumer (a random 0–50 ms apart).
    public var crashConsumersWithService = false
    public var log: @Sendable (String) -> Void = { print($0) }

    public init() {}

    /// Experiment 1: `kills` SIGKILLs of the service at random moments while the producers run.
    public func killNine(databaseURL: String, kills: Int) throws -> ExperimentOutcome {
        var rng = SeededRandom(seed: seed)
        var notes: [String] = []
        let crashing = crashConsumersWithService ? ", consumers crashed with it" : ""
        return try run(name: "kill9 (\(kills) × kill -9\(crashing), \(load.events) events)", databaseURL: databaseURL) { serve, recorder, finished, streams in
            let total = load.events
            for k in 0..<kills {
                // Each kill lands at a random point of its share of the run, then a random few ms later.
                let share = Double(k) / Double(kills), next = Double(k + 1) / Double(kills)
                let target = Int(Double(total) * Double.random(in: share...next, using: &rng) * 0.9)
                while recorder.ackedCount < target && !finished() { usleep(1_000) }
                usleep(UInt32.random(in: 0...30_000, using: &rng))
                let acked = recorder.ackedCount
                serve.kill9()
                if crashConsumersWithService {
                    for c in streams { usleep(UInt32.random(in: 0...50_000, using: &rng)); c.crash() }
                }
                usleep(UInt32.random(in: 0...200_000, using: &rng))
                let t0 = Date()
                try serve.start()
                notes.append("kill \(k + 1) after \(acked) acks; restarted and listening in \(Int(Date().timeIntervalSince(t0) * 1000)) ms")
            }
            return notes
        }
    }

    /// Experiment 2: PostgreSQL crashed (`pg_ctl stop -m immediate`) for `outageSeconds` under load, then restarted.
    public func postgresCrash(cluster: LocalCluster, databaseURL: String, outageSeconds: Double) throws -> ExperimentOutcome {
        try run(name: "pgcrash (\(outageSeconds) s outage, \(load.events) events)", databaseURL: databaseURL) { serve, recorder, finished, _ in
            while recorder.ackedCount < load.events / 3 && !finished() { usleep(1_000) }
            let rssBefore = serve.residentKilobytes() ?? 0
            cluster.kill()
            let crashed = Date()
            usleep(300_000)   // replies to batches in flight at the crash arrive now
            let acksAfterCrash = recorder.ackedCount
            var peakRSS = rssBefore
            while Date().timeIntervalSince(crashed) < outageSeconds {
                peakRSS = max(peakRSS, serve.residentKilobytes() ?? 0)
                usleep(100_000)
            }
            let acksDuringOutage = recorder.ackedCount - acksAfterCrash
            try cluster.start()
            let back = Date()
            let acksAtRestart = recorder.ackedCount
            while recorder.ackedCount == acksAtRestart && !finished() && Date().timeIntervalSince(back) < 60 { usleep(1_000) }
            let resumed = Date().timeIntervalSince(back)
            return [
                "PostgreSQL down for \(String(format: "%.1f", Date().timeIntervalSince(crashed) - resumed)) s; acks while down (after the first 0.3 s): \(acksDuringOutage)",
                "service RSS: \(rssBefore / 1024) MiB before the crash, peak \(peakRSS / 1024) MiB during the outage",
                "first ack \(Int(resumed * 1000)) ms after PostgreSQL was back",
            ]
        }
    }

    /// Any other disruption: `disrupt` gets the service, the recorder and "has the load finished",
    /// does its damage while the producers run, and returns lines for the report.
    public func run(name: String, databaseURL: String,
                     disrupt: (ServeProcess, HistoryRecorder, @escaping @Sendable () -> Bool, [ResumingConsumer]) throws -> [String]) throws -> ExperimentOutcome {
        let logPath = FileManager.default.temporaryDirectory.path + "/herald-experiment-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).log"
        var arguments = extraServeArguments
        if acknowledgeBeforeCommit { arguments.append("--unsafe-acknowledge-before-commit-for-testing") }
        let serve = try ServeProcess(databaseURL: databaseURL, logPath: logPath, extraArguments: arguments)
        defer { serve.kill9() }
        try serve.start()
        try load.prepare(port: serve.port)
        let recorder = HistoryRecorder(consumers: consumers)
        let streams = consumers.map { ResumingConsumer(name: $0, port: serve.port, recorder: recorder) }

        // The producers run on their own thread; the disruption runs here.
        let finished = LockedFlag()
        let result = LockedBox<Result<ResendingLoad.Stats, Error>>()
        let load = self.load
        let port = serve.port
        let producers = Thread {
            result.set(Result { try load.run(port: port, recorder: recorder) })
            finished.set()
        }
        producers.start()
        let notes = try disrupt(serve, recorder, { finished.isSet }, streams)
        while !finished.isSet { usleep(10_000) }
        let stats = try result.get()!.get()

        // Every stored submit gets its delivery one transaction after its ack: wait for them.
        let conn = try PGConnection.connect(databaseURL)
        defer { conn.close() }
        var head: Int64 = 0
        for _ in 0..<600 {
            let r = try conn.execute("SELECT (SELECT count(*) FROM events WHERE type = 'submit'), (SELECT count(*) FROM deliveries), (SELECT cursor FROM delivery_heads WHERE partition = 0)")
            head = r.int64(0, 2) ?? 0
            if r.int64(0, 1) ?? 0 >= r.int64(0, 0) ?? 0 { break }
            usleep(100_000)
        }
        let caughtUp = streams.map { $0.stop(at: head) }
        let drained = serve.terminate()
        let replay = Self.replay(binary: serve.binary, databaseURL: databaseURL)
        let checker = try recorder.history(from: databaseURL)
        var allNotes = notes
        for (stream, ok) in zip(streams, caughtUp) {
            allNotes.append("consumer \(stream.name): \(stream.sessions) connections, \(ok ? "caught up" : "did NOT catch up") to cursor \(head)")
        }
        if !drained { allNotes.append("the service did not stop within 30 s of SIGTERM and was killed") }
        allNotes.append("service log: \(logPath)")
        let outcome = ExperimentOutcome(name: name + (acknowledgeBeforeCommit ? " [negative control: ack before commit]" : ""),
                                        report: checker.check(), load: stats, replayStatus: replay.status, replayOutput: replay.output, notes: allNotes)
        log(outcome.description)
        return outcome
    }

    /// Runs `herald replay` on the database and returns its exit status and output.
    public static func replay(binary: String, databaseURL: String) -> (status: Int32, output: String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: binary)
        p.arguments = ["replay", "--database-url", databaseURL]
        let out = Pipe()
        p.standardOutput = out
        p.standardError = out
        do { try p.run() } catch { return (127, "could not run \(binary): \(error)") }
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return (p.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}

/// A flag set once from one thread and read from others.
final class LockedFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    func set() { lock.withLock { value = true } }
    var isSet: Bool { lock.withLock { value } }
}

/// A value set once from one thread and read from another.
final class LockedBox<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: T?
    func set(_ v: T) { lock.withLock { value = v } }
    func get() -> T? { lock.withLock { value } }
}
