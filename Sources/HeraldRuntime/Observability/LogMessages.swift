// The service's and the commands' messages as swift-log records: the level a message's prefix names.
import Logging

/// Herald's messages say their level as a prefix (`error: …`, `warning: …`, `WARNING: …`,
/// `notice: …`; none: information). `LogMessages` turns such a message into a record of that
/// level without the prefix, and a message ending in a snake_case code in parentheses
/// (`… (invalid_token)`) gets that code as the field `code`.
public enum LogMessages {
    static let prefixes: [(String, Logger.Level)] = [
        ("error: ", .error), ("warning: ", .warning), ("WARNING: ", .warning), ("notice: ", .notice),
    ]

    /// The level a message names, and the message without its prefix.
    public static func classify(_ message: String) -> (level: Logger.Level, message: String) {
        for (prefix, level) in prefixes where message.hasPrefix(prefix) {
            return (level, String(message.dropFirst(prefix.count)))
        }
        return (.info, message)
    }

    /// The snake_case code in parentheses that a refusal's message carries (`(invalid_token)`),
    /// before `;` or at the end.
    public static func code(in message: String) -> String? {
        guard let open = message.range(of: " (", options: .backwards),
              let close = message[open.upperBound...].firstIndex(of: ")") else { return nil }
        let code = message[open.upperBound..<close]
        let after = message[message.index(after: close)...]
        guard !code.isEmpty, code.allSatisfy({ $0 == "_" || ("a"..."z").contains($0) }),
              after.isEmpty || after.hasPrefix(";") else { return nil }
        return String(code)
    }

    /// Logs `message` at the level its prefix names.
    public static func log(_ message: String, to logger: Logger, metadata: Logger.Metadata = [:]) {
        let (level, text) = classify(message)
        guard logger.logLevel <= level else { return }
        var fields = metadata
        if let code = code(in: text) { fields["code"] = .string(code) }
        logger.log(level: level, "\(text)", metadata: fields.isEmpty ? nil : fields)
    }

    /// A `(String) -> Void` log (the service's and the store's) that writes to `logger`.
    public static func sink(_ logger: Logger) -> @Sendable (String) -> Void {
        { log($0, to: logger) }
    }
}
