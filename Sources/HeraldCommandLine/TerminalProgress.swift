// Progress of long commands (import, export) on stderr, only when stderr is a terminal: one line rewritten in place.
import Foundation
import Glibc

/// `label: 120,000 of 265,000 (45%)`, rewritten at most 4 times a second with `\r`, then cleared.
/// Nil when stderr is not a terminal: logs, pipes and `--json` consumers never see it.
public final class TerminalProgress {
    private let label: String
    private let unit: String
    private var total: Int?
    private var lastDrawn = 0.0
    private var drawn = false

    public init?(label: String, unit: String, total: Int? = nil, terminal: Bool = isatty(STDERR_FILENO) == 1) {
        guard terminal else { return nil }
        self.label = label
        self.unit = unit
        self.total = total
    }

    /// `done` so far; drawn when a quarter second has passed since the last drawing.
    public func update(_ done: Int) {
        let now = Date().timeIntervalSince1970
        guard now - lastDrawn >= 0.25 else { return }
        lastDrawn = now
        var line = "\r\(label): \(Self.grouped(done)) \(unit)"
        if let total, total > 0 { line += " of \(Self.grouped(total)) (\(min(100, done * 100 / total))%)" }
        FileHandle.standardError.write(Data((line + "\u{1B}[K").utf8))
        drawn = true
    }

    /// Clears the line, so the command's last message starts on a clean one.
    public func finish() {
        if drawn { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
    }

    static func grouped(_ n: Int) -> String {
        let digits = String(n)
        var out = ""
        for (i, ch) in digits.enumerated() {
            if i > 0 && (digits.count - i) % 3 == 0 { out.append(",") }
            out.append(ch)
        }
        return out
    }

    /// The size of a regular file on standard input (a redirect), nil for a pipe or a terminal.
    public static func standardInputBytes() -> Int? {
        var s = stat()
        guard fstat(STDIN_FILENO, &s) == 0, (s.st_mode & S_IFMT) == S_IFREG else { return nil }
        return Int(s.st_size)
    }
}
