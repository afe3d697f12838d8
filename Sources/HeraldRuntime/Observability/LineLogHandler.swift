// A swift-log handler that writes one line per record to a file descriptor (stderr): text or JSON.
import Glibc
import HeraldCore
import Logging

/// How log lines are written (`--log-format`).
public enum LogFormat: String, CaseIterable, Sendable {
    /// `2026-03-29T01:59:59.123Z warning message key=value …`: for people.
    case text
    /// `{"ts":"…","level":"…","msg":"…", fields…}`: one JSON object a line, for log pipelines.
    case json
    /// `herald: message`: the one-shot commands' messages (no timestamp, level or fields).
    case plain
}

/// One line per record, written with a single `write(2)` so lines of concurrent threads never
/// interleave. Metadata becomes fields: `key=value` after a text line's message, members of a
/// JSON line after `ts`, `level` and `msg` (a field never replaces those three).
public struct LineLogHandler: LogHandler {
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    public let format: LogFormat
    let fd: Int32

    public init(format: LogFormat, level: Logger.Level, fd: Int32 = STDERR_FILENO) {
        self.format = format
        self.logLevel = level
        self.fd = fd
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var fields = metadata
        if let provided = metadataProvider?.get() { fields.merge(provided) { $1 } }
        if let own = event.metadata { fields.merge(own) { $1 } }
        let line = Self.line(format: format, level: event.level, message: "\(event.message)", fields: fields,
                             timestamp: Self.now())
        var bytes = Array(line.utf8)
        bytes.append(0x0A)
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let n = write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if n > 0 { offset += n } else if n < 0 && errno == EINTR { continue } else { return }
            }
        }
    }

    /// One record as a line (without its newline). Fields in key order, so lines compare in tests.
    public static func line(format: LogFormat, level: Logger.Level, message: String, fields: Logger.Metadata,
                            timestamp: String) -> String {
        let keys = fields.keys.filter { !["ts", "level", "msg"].contains($0) }.sorted()
        switch format {
        case .plain:
            return "herald: " + message
        case .text:
            var out = timestamp + " " + level.rawValue + " " + message
            for key in keys { out += " " + key + "=" + textValue(fields[key]!) }
            return out
        case .json:
            var object = "{\"ts\":" + quoted(timestamp) + ",\"level\":" + quoted(level.rawValue) + ",\"msg\":" + quoted(message)
            for key in keys { object += "," + quoted(key) + ":" + jsonValue(fields[key]!) }
            return object + "}"
        }
    }

    static func quoted(_ s: String) -> String { JSONValue.string(s).canonicalString }

    static func jsonValue(_ value: Logger.MetadataValue) -> String {
        switch value {
        case .string(let s): quoted(s)
        case .stringConvertible(let c): c is any BinaryInteger ? "\(c)" : quoted("\(c)")
        case .array(let items): "[" + items.map(jsonValue).joined(separator: ",") + "]"
        case .dictionary(let d): "{" + d.keys.sorted().map { quoted($0) + ":" + jsonValue(d[$0]!) }.joined(separator: ",") + "}"
        }
    }

    /// A text field's value: bare when it has no space, quote or `=`, else quoted as in JSON.
    static func textValue(_ value: Logger.MetadataValue) -> String {
        let s = "\(value)"
        return s.isEmpty || s.contains(where: { $0 == " " || $0 == "\"" || $0 == "=" || $0.isNewline }) ? quoted(s) : s
    }

    /// Now in UTC, RFC 3339 with milliseconds: `2026-03-29T01:59:59.123Z`.
    public static func now() -> String {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        var seconds = ts.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let ms = Int(ts.tv_nsec / 1_000_000)
        let millis = ms < 10 ? "00\(ms)" : ms < 100 ? "0\(ms)" : "\(ms)"
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)).\(millis)Z"
    }
}

extension Logger.Level {
    /// `--log-level`'s words: swift-log's levels, and `warn` for `warning`.
    public init?(flag: String) {
        if flag == "warn" { self = .warning; return }
        self.init(rawValue: flag)
    }
}
