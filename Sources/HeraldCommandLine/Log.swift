// Messages of the command-line tools, on stderr, through swift-log: plain for one-shot commands, text or JSON lines for long-running ones.
import ArgumentParser
import Glibc
import HeraldRuntime
import Logging

/// Progress and errors go to stderr; stdout carries only results. One-shot commands write
/// `herald: message`; a long-running command calls `LogOptions.configure()` first, and from then
/// on every message is a timestamped line with its level (`--log-format text`) or a JSON object
/// (`--log-format json`), below `--log-level` dropped.
public enum Log {
    /// Set once at start-up (`LogOptions.configure`), before any other thread logs.
    nonisolated(unsafe) public private(set) static var logger = Logger(label: "herald") { _ in
        LineLogHandler(format: .plain, level: .info)
    }

    /// The format in force (`plain` until `LogOptions.configure`).
    nonisolated(unsafe) public private(set) static var format = LogFormat.plain

    /// A message in Herald's convention: its level from its prefix (`error: `, `warning: ` …).
    /// Plain lines keep the message whole, prefix included (`herald: error: …`), as they always read.
    public static func info(_ message: String) {
        if format == .plain {
            logger.log(level: LogMessages.classify(message).level, "\(message)")
        } else {
            LogMessages.log(message, to: logger)
        }
    }

    /// Replaces the logger (`LogOptions.configure`); `instance` names this process in every line.
    public static func use(format: LogFormat, level: Logger.Level, instance: String?) {
        var logger = Logger(label: "herald") { _ in LineLogHandler(format: format, level: level) }
        if let instance { logger[metadataKey: "instance"] = .string(instance) }
        self.logger = logger
        self.format = format
    }
}

/// `--log-format` and `--log-level` of the long-running commands (serve, tail, import, export, replay).
public struct LogOptions: ParsableArguments {
    @Option(name: .customLong("log-format"), help: "text (a timestamp, the level, the message and key=value fields) or json (one object a line: ts, level, msg and fields).")
    public var format = "text"
    @Option(name: .customLong("log-level"), help: "The least level logged: trace, debug, info, notice, warning, error or critical. Ordinary connection closes are debug.")
    public var level = "info"

    public init() {}

    public func validate() throws {
        guard let format = LogFormat(rawValue: format), format != .plain else {
            throw ValidationError("--log-format must be text or json")
        }
        guard Logger.Level(flag: level) != nil else {
            throw ValidationError("--log-level must be one of trace, debug, info, notice, warning, error, critical")
        }
    }

    /// Makes `Log` write lines in this format from now on; the process's lines carry `instance`.
    public func configure(instance: String? = nil) {
        Log.use(format: LogFormat(rawValue: format) ?? .text, level: Logger.Level(flag: level) ?? .info, instance: instance)
    }

    /// This machine's host name and the process id: what tells one Herald's lines from another's.
    public static func defaultInstance() -> String {
        var name = [CChar](repeating: 0, count: 256)
        gethostname(&name, name.count - 1)
        return name.withUnsafeBufferPointer { String(cString: $0.baseAddress!) } + ":" + String(getpid())
    }
}
