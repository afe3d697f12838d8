// `herald bench restart`: a log with N users and M pending timers; a fresh `herald serve` process's time to serving, and its RSS.
import ArgumentParser
import Foundation
import Glibc
import HeraldCore
import HeraldStore
import HeraldTestSupport

struct RestartBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restart",
        abstract: "Time from `herald serve` process start to the first hello answered, on a log of N users and M pending timers; RSS after.",
        discussion: """
            The history (per user: an authorization and M/N notifications deferred to instants over the next \
            48 hours) is built by SyntheticHistory (the service's own admission and fold, written by COPY). Then a \
            child `herald serve --clock manual` starts on it --runs times; each run is timed from spawning the \
            process until a hello is answered (start-up folds the whole log before it listens), and the child's \
            VmRSS/VmHWM are read from /proc. Reference in the same run: a binary COPY of the events table (what \
            reading the log alone costs).
            """)

    @OptionGroup var database: DatabaseOptions
    @Option(help: "Users.") var users = 1_000_000
    @Option(help: "Pending timers (deferred notifications) in all, spread evenly over the users.") var timers = 10_000_000
    @Option(help: "Restarts to time (the median is reported).") var runs = 3
    @Flag(help: "Print JSON instead of a table.") var json = false

    static let start = Instant(rfc3339: "2026-11-23T06:00:00Z")!

    func run() throws {
        try reportingErrors {
            let location = try database.resolve()
            defer { location.close() }
            let url = try scratchDatabase(location, name: "herald_bench_restart")
            let perUser = max(0, timers / max(1, users))

            let log = try SyntheticLog.build(url: url, label: "restart: building \(users) users × \(perUser) timers", users: users,
                                             start: Self.start, time: { _ in Self.start },
                                             requests: { SyntheticWorkloads.timersUser($0, timers: perUser, from: Self.start) })
            let loadSeconds = log.seconds
            let events = log.events

            // The floor of any restart that reads the log: one binary COPY of it.
            let reader = try PGConnection.connect(url)
            let copyWatch = Stopwatch()
            let copied = try reader.copyOut("COPY (SELECT seq, user_id, type, app, notification_id, body, engine_time FROM events ORDER BY seq) TO STDOUT (FORMAT binary)")
            let copySeconds = copyWatch.seconds
            reader.close()

            var samples: [(serving: Double, rss: Int, peak: Int, stats: JSONValue?)] = []
            for r in 1...runs {
                Log.info("restart: run \(r)/\(runs): starting herald serve on \(Fmt.int(events)) events")
                samples.append(try Self.timeRestart(url: url))
                Log.info("restart: run \(r): serving after \(Fmt.s(samples.last!.serving)), RSS \(Fmt.mib(samples.last!.rss))")
            }
            let serving = median(samples.map(\.serving))
            let rss = Int(median(samples.map { Double($0.rss) })), peak = Int(median(samples.map { Double($0.peak) }))
            let stats = samples.last?.stats

            var report = BenchReport("restart: \(Fmt.int(users)) users, \(Fmt.int(perUser * users)) pending timers (deferred notifications), \(Fmt.int(events)) events")
            report.row("history built (SyntheticHistory, COPY)", Fmt.s(loadSeconds), "\(Fmt.int(Double(events) / loadSeconds)) events/s",
                       key: "loadSeconds", value: Fmt.j(loadSeconds))
            report.row("  of which COPY / move into events + ANALYZE", "\(Fmt.s(log.copySeconds)) / \(Fmt.s(log.finishSeconds))",
                       "the rest: admission, fold, row formatting in Swift")
            report.json["events"] = .int(Int64(events))
            report.json["users"] = .int(Int64(users))
            report.json["timers"] = .int(Int64(perUser * users))
            report.row("process start → first hello answered", Fmt.s(serving),
                       "median of \(runs): " + samples.map { String(format: "%.2f", $0.serving) }.joined(separator: ", ") + " s; \(Fmt.int(Double(events) / serving)) events/s",
                       key: "servingSeconds", value: Fmt.j(serving))
            report.row("RSS after start-up / peak (VmRSS / VmHWM)", "\(Fmt.mib(rss)) / \(Fmt.mib(peak))",
                       "\(Fmt.int(Double(rss) * 1024 / Double(max(1, users)))) B per user", key: "rssKiB", value: .int(Int64(rss)))
            report.json["peakRssKiB"] = .int(Int64(peak))
            if let stats {
                report.row("restored (stats)", "\(stats["users"]?.intValue ?? 0) users",
                           "\(stats["timers"]?.intValue ?? 0) user wake-ups in the wheel (one per user: its earliest deadline)")
            }
            report.row("reference: binary COPY of the log", Fmt.s(copySeconds),
                       "\(Fmt.int(Double(copied.rows) / copySeconds)) rows/s, \(Fmt.int(Double(copied.bytes) / 1_048_576)) MiB",
                       key: "copySeconds", value: Fmt.j(copySeconds))
            let scale = (1_000_000 / Double(max(1, users)) + 10_000_000 / Double(max(1, perUser * users))) / 2
            report.row("target: 1M users / 10M timers serving ≤ 15 s, RSS ≤ 2 GiB",
                       "×\(String(format: "%.0f", scale)) scale",
                       String(format: "linear extrapolation: %.0f s, %.1f GiB", serving * scale, Double(peak) * scale / 1_048_576))
            report.print(asJSON: json)
        }
    }

    /// Spawns `herald serve` on `url` and polls until a hello is answered; reads the child's memory, asks for stats, stops it.
    static func timeRestart(url: String) throws -> (serving: Double, rss: Int, peak: Int, stats: JSONValue?) {
        let port = freePort()
        let child = Process()
        child.executableURL = URL(fileURLWithPath: executablePath())
        child.arguments = ["serve", "--database-url", url, "--listen", "127.0.0.1:\(port)",
                           "--clock", "manual", "--start", start.rfc3339]
        let logPath = "/tmp/herald-bench-restart-\(getpid()).log"
        FileManager.default.createFile(atPath: logPath, contents: nil)
        child.standardError = FileHandle(forWritingAtPath: logPath)
        child.standardOutput = FileHandle.nullDevice
        let watch = Stopwatch()
        try child.run()
        defer {
            if child.isRunning { child.terminate(); child.waitUntilExit() }
        }
        while true {
            if !child.isRunning {
                throw StoreError.configuration("herald serve exited during start-up (status \(child.terminationStatus)); see \(logPath)")
            }
            if let client = try? WireClient(port: port) {
                let reply = try client.request(#"{"op":"hello"}"#, timeoutMilliseconds: 600_000)
                let serving = watch.seconds
                guard reply["ok"] == true else { throw StoreError.configuration("hello refused: \(reply.canonicalString)") }
                let memory = BenchMachine.memory(pid: String(child.processIdentifier))
                let stats = try? client.request(#"{"op":"stats"}"#)
                return (serving, memory.rss, memory.peak, stats)
            }
            usleep(5_000)
        }
    }

    /// A TCP port nothing listens on now (bound to port 0 and released).
    static func freePort() -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) }
        }
        _ = withUnsafeMutablePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        return Int(UInt16(bigEndian: addr.sin_port))
    }

    /// This executable's path (/proc/self/exe).
    static func executablePath() -> String {
        var buffer = [CChar](repeating: 0, count: 4096)
        let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        return n > 0 ? String(decoding: buffer[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self) : CommandLine.arguments[0]
    }
}
