// Store failures as typed errors; every SQLSTATE Herald cares about is mapped here and nowhere else.

/// What went wrong talking to PostgreSQL, written to be shown to an operator: what happened,
/// why, and what to do. `isRetryable` tells callers whether the same request may simply be sent again.
public enum StoreError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No connection, or the connection broke. Retry after reconnecting.
    case unavailable(String)
    /// A unique key already exists (e.g. the idempotency key of an event).
    case duplicate(constraint: String?, message: String)
    /// The table refused a change because it is append-only (UPDATE/DELETE/TRUNCATE on the log).
    case appendOnly(String)
    /// Two writers collided (serialization failure / deadlock); the transaction may be retried.
    case conflict(String)
    /// The server is shutting down, in recovery, or out of resources.
    case serverUnavailable(sqlstate: String, message: String)
    /// The writer's epoch is not its partition's: another instance took the partition over, so
    /// this one must stop appending to it (SQLSTATE HE002). Nothing of the transaction is stored.
    case fenced(String)
    /// Anything else the server rejected: a bug in a query or a schema mismatch.
    case rejected(sqlstate: String, message: String, detail: String?, hint: String?)
    /// A local misconfiguration: bad connection string, missing binaries, and so on.
    case configuration(String)

    /// Maps a server error to a typed error. The single place SQLSTATEs are interpreted.
    static func fromServer(sqlstate: String, message: String, detail: String?, hint: String?, constraint: String?) -> StoreError {
        switch sqlstate {
        case "23505":
            return .duplicate(constraint: constraint, message: message)
        case "XX000" where message.hasPrefix(citusRelayedUniqueViolation):
            // Citus relays a worker's unique violation during a COPY into a distributed table
            // without its SQLSTATE or constraint field (its ReportCopyError): the writer's COPY
            // met a stored key as on one PostgreSQL. Recognised by PostgreSQL's message, so the
            // workers' lc_messages must be English (C), as Citus's own tests run them.
            return .duplicate(constraint: constraint ?? quotedName(in: message), message: message)
        case "HE001":
            return .appendOnly(message)
        case "HE002":
            return .fenced(message)
        case "40001", "40P01":
            return .conflict(message)
        case "57P01", "57P02", "57P03", "53300", "53100", "53200", "08000", "08003", "08006", "08001", "08004":
            return .serverUnavailable(sqlstate: sqlstate, message: message)
        case "":
            // libpq reports a lost connection without a SQLSTATE.
            return .unavailable(message.trimmingTrailingNewlines)
        default:
            return .rejected(sqlstate: sqlstate, message: message, detail: detail, hint: hint)
        }
    }

    /// How PostgreSQL's unique-violation message begins (lc_messages C).
    static let citusRelayedUniqueViolation = "duplicate key value violates unique constraint"

    /// The first double-quoted name in a message (a constraint's), nil when there is none.
    static func quotedName(in message: String) -> String? {
        let parts = message.split(separator: "\"", omittingEmptySubsequences: false)
        return parts.count >= 3 ? String(parts[1]) : nil
    }

    public var isRetryable: Bool {
        switch self {
        case .unavailable, .conflict, .serverUnavailable: return true
        case .duplicate, .appendOnly, .fenced, .rejected, .configuration: return false
        }
    }

    /// What a client is told when a retryable error refused its request: one line, no advice
    /// meant for the operator (libpq's text runs over several lines with its own hints).
    public var clientReason: String {
        switch self {
        case .unavailable(let m):
            // What, not where: libpq's line names the database's host and port, which are not the
            // client's business; the service's log keeps the whole text.
            var why = Self.firstLine(of: m)
            if let r = why.range(of: "failed: ", options: .backwards) { why = String(why[r.upperBound...]) }
            if why.isEmpty || why.contains("\"") || why.contains("port ") { return "PostgreSQL is unreachable (the service's log says why)" }
            return "PostgreSQL is unreachable: \(why)"
        case .serverUnavailable(let s, let m): return "PostgreSQL cannot serve right now (SQLSTATE \(s): \(Self.firstLine(of: m)))"
        case .conflict(let m): return "two writers collided in PostgreSQL (\(Self.firstLine(of: m)))"
        default: return Self.firstLine(of: description)
        }
    }

    /// The first line of a libpq message, without its trailing period or spaces.
    static func firstLine(of message: String) -> String {
        let line = message.split(whereSeparator: \.isNewline).first.map(String.init) ?? message
        var trimmed = Substring(line)
        while let last = trimmed.last, last == "." || last.isWhitespace { trimmed = trimmed.dropLast() }
        return String(trimmed)
    }

    public var description: String {
        switch self {
        case .unavailable(let m):
            return "PostgreSQL is unreachable (\(m)). Herald retries by itself; check that the server is running and the database URL is right."
        case .duplicate(let c, let m):
            return "A row with the same key already exists (\(c ?? "unique constraint"): \(m))."
        case .appendOnly(let m):
            return "The change was refused because the table is append-only: \(m)."
        case .fenced(let m):
            return "This instance no longer owns the partition (\(Self.firstLine(of: m))): another instance took it over."
        case .conflict(let m):
            return "Two writers collided (\(m)); the transaction can be retried."
        case .serverUnavailable(let s, let m):
            return "PostgreSQL cannot serve right now (SQLSTATE \(s): \(m)). Herald retries; check the server's log."
        case .rejected(let s, let m, let d, let h):
            var text = "PostgreSQL rejected a statement (SQLSTATE \(s)): \(m)"
            if let d { text += " Detail: \(d)" }
            if let h { text += " Hint: \(h)" }
            return text
        case .configuration(let m):
            return m
        }
    }
}

extension StoreError {
    /// The same error told when the command ends with it (`replay`, `state`, `import`, … and `serve`
    /// failing to start): it gives up at once, so it must not promise that Herald retries (that is
    /// the running service's reconnect wording, `description`). It also tells a database that does not exist, and one
    /// without Herald's tables, apart from a server that cannot be reached.
    public var oneShotDescription: String {
        switch self {
        case .unavailable(let m):
            // libpq has no SQLSTATE for a refused connection; the server's FATAL text (3D000) is all there is.
            if let name = Self.missingDatabaseName(in: m) {
                return "The database “\(name)” does not exist on that PostgreSQL server (\(m)). "
                    + "Check the database name in the URL, or create it (createdb \(name)) and run herald migrate."
            }
            return "PostgreSQL is unreachable (\(m)). Check that the server is running and the database URL is right, then run the command again."
        case .serverUnavailable(let s, let m):
            return "PostgreSQL cannot serve right now (SQLSTATE \(s): \(m)). Run the command again once it can; its log says why."
        case .rejected("42P01", let m, _, _):
            return "This database has no Herald schema (\(m)): a table Herald keeps is missing. "
                + "Run herald migrate against it if it is meant to hold Herald's log, or check the database name in the URL."
        default:
            return description
        }
    }

    /// The name in libpq's `database "NAME" does not exist` (the server's 3D000 at connection time).
    static func missingDatabaseName(in message: String) -> String? {
        guard let start = message.firstRange(of: "database \"")?.upperBound,
              let end = message[start...].firstRange(of: "\" does not exist")?.lowerBound else { return nil }
        return String(message[start..<end])
    }
}

extension String {
    var trimmingTrailingNewlines: String {
        var s = Substring(self)
        while let last = s.last, last == "\n" || last == "\r" || last == " " { s = s.dropLast() }
        return String(s)
    }
}
