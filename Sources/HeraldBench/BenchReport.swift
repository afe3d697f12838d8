// What every benchmark scenario prints: a table on stdout (or one JSON object), progress on stderr, the load it ran under.
import Foundation
import Glibc
import HeraldCommandLine
import HeraldCore
import HeraldStore

/// The result table of one scenario: rows of (what, value, note), and the same numbers as JSON.
struct BenchReport {
    var title: String
    var rows: [(String, String, String)] = []
    var json: [String: JSONValue] = [:]

    init(_ title: String) {
        self.title = title
        json["scenario"] = .string(title)
        json["loadAverage"] = .string(BenchMachine.loadAverage())
    }

    /// A row; `key`/`value` also go into the JSON.
    mutating func row(_ what: String, _ shown: String, _ note: String = "", key: String? = nil, value: JSONValue? = nil) {
        rows.append((what, shown, note))
        if let key, let value { json[key] = value }
    }

    func print(asJSON: Bool) {
        if asJSON {
            Swift.print(JSONValue.object(json).canonicalString)
            return
        }
        Swift.print(title)
        let w0 = rows.map(\.0.count).max() ?? 0, w1 = rows.map(\.1.count).max() ?? 0
        for (a, b, c) in rows {
            let line = "  " + a.padding(toLength: w0, withPad: " ", startingAt: 0) + "  "
                + String(repeating: " ", count: w1 - b.count) + b + (c.isEmpty ? "" : "   " + c)
            Swift.print(line)
        }
        Swift.print("  (load average at the end: \(BenchMachine.loadAverage()))")
    }
}

/// Number formatting for the tables.
enum Fmt {
    static func int(_ v: Double) -> String {
        let n = Int(v.rounded())
        var s = String(n.magnitude), out = ""
        while s.count > 3 { out = "," + s.suffix(3) + out; s = String(s.dropLast(3)) }
        return (n < 0 ? "-" : "") + s + out
    }
    static func int(_ v: Int) -> String { int(Double(v)) }
    static func s(_ v: Double) -> String { String(format: "%.2f s", v) }
    static func ms(_ v: Double) -> String { String(format: "%.1f ms", v) }
    static func x(_ v: Double) -> String { String(format: "%.2f×", v) }
    static func mib(_ kib: Int) -> String { String(format: "%.0f MiB", Double(kib) / 1024) }
    /// Rounded to 3 decimals, for JSON.
    static func j(_ v: Double) -> JSONValue { .double((v * 1000).rounded() / 1000) }
}

/// A progress bar on stderr (a terminal), or a line every 10% (a file or pipe).
final class ProgressBar {
    let label: String
    let total: Int
    private let tty = isatty(2) == 1
    private var lastShown = -1
    private let started = Date()

    init(_ label: String, total: Int) { self.label = label; self.total = max(1, total) }

    func update(_ done: Int) {
        let pct = min(100, done * 100 / total)
        if tty {
            guard pct != lastShown else { return }
            lastShown = pct
            let bar = String(repeating: "#", count: pct / 4) + String(repeating: " ", count: 25 - pct / 4)
            FileHandle.standardError.write(Data("\r\(label) [\(bar)] \(pct)% \(done)/\(total) \(Int(Date().timeIntervalSince(started)))s ".utf8))
        } else if pct / 10 != lastShown / 10 || lastShown < 0 {
            lastShown = pct
            Log.info("\(label): \(done)/\(total) (\(pct)%) after \(Int(Date().timeIntervalSince(started))) s")
        }
    }

    func finish() {
        if tty { FileHandle.standardError.write(Data("\n".utf8)) }
    }
}

/// Facts about the machine recorded beside each number.
enum BenchMachine {
    /// This executable's path (/proc/self/exe).
    static func executablePath() -> String {
        var buffer = [CChar](repeating: 0, count: 4096)
        let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        return n > 0 ? String(decoding: buffer[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self) : CommandLine.arguments[0]
    }

    /// The `herald` built beside this executable: the service the benches start as a child.
    static func heraldPath() -> String {
        URL(fileURLWithPath: executablePath()).deletingLastPathComponent().appendingPathComponent("herald").path
    }

    /// Runs `executable` (stdout captured, stderr passed through) and returns its last stdout line
    /// as JSON: the peer's script and the suite's scenarios answer so. Throws, saying what failed,
    /// when it cannot start, exits with a non-zero status, or prints no JSON line.
    static func lastJSONLine(running executable: String, _ arguments: [String]) throws -> JSONValue {
        let child = Process()
        child.executableURL = URL(fileURLWithPath: executable)
        child.arguments = arguments
        let out = Pipe()
        child.standardOutput = out
        child.standardError = FileHandle.standardError
        do { try child.run() } catch { throw StoreError.configuration("\(executable) could not start: \(error)") }
        let data = out.fileHandleForReading.readDataToEndOfFile()
        child.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self)
        guard child.terminationStatus == 0 else {
            let output = text.isEmpty ? "" : "; its output: \(text.suffix(400))"
            throw StoreError.configuration("\(executable) failed (exit status \(child.terminationStatus); its errors are above, on stderr)\(output)")
        }
        guard let last = text.split(separator: "\n").last, let value = try? JSONValue.parse(Array(last.utf8)) else {
            throw StoreError.configuration("\(executable) printed no JSON line; its output: \(text.suffix(400))")
        }
        return value
    }
    /// The 1, 5 and 15 minute load averages (`uptime`), as text.
    static func loadAverage() -> String {
        guard let text = try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8) else { return "?" }
        return text.split(separator: " ").prefix(3).joined(separator: " ")
    }

    /// CPU seconds (user + system) a process has used so far, from `/proc/<pid>/stat`; 0 if unreadable.
    static func cpuSeconds(pid: String = "self") -> Double {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")") else { return 0 }
        let fields = text[text.index(after: close)...].split(separator: " ")
        // After the command: state is field 3 of stat(5), utime 14, stime 15.
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// CPU seconds the whole machine has been busy so far (`/proc/stat`: every state but idle and
    /// iowait), to see how much of a short burst the cores spent working; 0 if unreadable.
    static func busyCPUSeconds() -> Double {
        guard let text = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
              let line = text.split(separator: "\n").first, line.hasPrefix("cpu ") else { return 0 }
        // user nice system idle iowait irq softirq steal …
        var ticks: Int64 = 0
        for (i, x) in line.split(separator: " ").dropFirst().compactMap({ Int64($0) }).prefix(8).enumerated()
            where i != 3 && i != 4 { ticks += x }
        return Double(ticks) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// VmRSS and VmHWM (peak) of a process, in KiB (`self` or a pid).
    static func memory(pid: String = "self") -> (rss: Int, peak: Int) {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return (0, 0) }
        func field(_ name: String) -> Int {
            for line in text.split(separator: "\n") where line.hasPrefix(name) {
                return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
            }
            return 0
        }
        return (field("VmRSS:"), field("VmHWM:"))
    }
}

/// Seconds since an origin, monotonic.
struct Stopwatch {
    private let origin = ContinuousClock.now
    var seconds: Double {
        let d = ContinuousClock.now - origin
        return Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }
}

/// The median of a few runs.
func median(_ values: [Double]) -> Double {
    let s = values.sorted()
    return s.isEmpty ? 0 : s[s.count / 2]
}
