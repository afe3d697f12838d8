// One libpq connection: blocking helpers for tools and start-up, non-blocking pipeline primitives for the hot path.
import CLibPQ
import Glibc

/// A libpq connection handle. Loop-agnostic: it exposes its socket and the libpq calls an
/// event loop needs (`flush`, `consumeInput`, `nextResult`), so the runtime can drive it
/// from libevent and tools from a tiny poll loop (`PGPoll`). Not thread-safe; one owner.
public final class PGConnection {
    /// Owned: created by PQconnectdb/PQconnectStart and `PQfinish`ed exactly once (in `close` or deinit).
    private var handle: OpaquePointer?

    private init(handle: OpaquePointer) {
        self.handle = handle
        // libpq prints the server's notices and warnings ("NOTICE: table … does not exist,
        // skipping", "WARNING: there is no transaction in progress") to stderr by default: they
        // would reach an operator's terminal and the service's log as raw PostgreSQL lines. Every
        // statement Herald sends expects them or can ignore them; its errors arrive as results.
        PQsetNoticeProcessor(handle, { _, _ in }, nil)
    }
    deinit { close() }

    /// Connects and waits for the connection (start-up, tools, tests; never on the service loop).
    public static func connect(_ conninfo: String) throws(StoreError) -> PGConnection {
        guard let h = PQconnectdb(ConnectionString.hardened(conninfo)) else {
            throw .configuration("libpq could not allocate a connection (out of memory).")
        }
        let conn = PGConnection(handle: h)
        guard PQstatus(h) == CONNECTION_OK else {
            throw ConnectionString.parseFailure(conninfo) ?? .unavailable(conn.lastErrorMessage)
        }
        return conn
    }

    /// A second connection to the same server and database, as this user, with the options this
    /// one was opened with (`PQconninfo`): for a tool that reads two streams at once.
    public func duplicate() throws(StoreError) -> PGConnection {
        guard let handle, let options = PQconninfo(handle) else { throw .unavailable(lastErrorMessage) }
        defer { PQconninfoFree(options) }
        return try Self.connect(ConnectionString.keywordString(ConnectionString.settings(options)))
    }

    /// Starts a non-blocking connection; drive it with `pollConnect()` whenever `socket` is ready.
    public static func startConnect(_ conninfo: String) throws(StoreError) -> PGConnection {
        guard let h = PQconnectStart(ConnectionString.hardened(conninfo)) else {
            throw .configuration("libpq could not allocate a connection (out of memory).")
        }
        let conn = PGConnection(handle: h)
        if PQstatus(h) == CONNECTION_BAD { throw ConnectionString.parseFailure(conninfo) ?? .unavailable(conn.lastErrorMessage) }
        return conn
    }

    /// One step of a non-blocking connect (PQconnectPoll).
    public func pollConnect() -> PostgresPollingStatusType {
        guard let handle else { return PGRES_POLLING_FAILED }
        return PQconnectPoll(handle)
    }

    public func close() {
        if let h = handle { PQfinish(h) }
        handle = nil
    }

    var rawHandle: OpaquePointer? { handle }

    public var isOpen: Bool { handle != nil && PQstatus(handle) == CONNECTION_OK }
    public var socket: Int32 { handle.map { PQsocket($0) } ?? -1 }
    public var serverVersion: Int { handle.map { Int(PQserverVersion($0)) } ?? 0 }
    /// The server process serving this connection (lets tests terminate it from elsewhere).
    public var backendPID: Int32 { handle.map { PQbackendPID($0) } ?? 0 }

    public var lastErrorMessage: String {
        guard let h = handle, let p = PQerrorMessage(h) else { return "connection closed" }
        let text = String(cString: p).trimmingTrailingNewlines
        return text.isEmpty ? "connection lost" : text
    }

    // MARK: Blocking use (tools, migrations, tests)

    /// Runs one statement with text parameters and waits for it. Throws the mapped server error.
    @discardableResult
    public func execute(_ sql: String, _ parameters: [String?] = []) throws(StoreError) -> PGResult {
        guard let handle else { throw .unavailable("connection closed") }
        let raw: OpaquePointer? = withCStrings(parameters) { values in
            PQexecParams(handle, sql, Int32(parameters.count), nil, values, nil, nil, 0)
        }
        guard let raw else { throw .unavailable(lastErrorMessage) }
        let result = PGResult(raw)
        if let error = result.error {
            if PQstatus(handle) != CONNECTION_OK { throw .unavailable(lastErrorMessage) }
            throw error
        }
        return result
    }

    // MARK: Non-blocking pipeline (the hot path)

    public func setNonBlocking() throws(StoreError) {
        guard let handle, PQsetnonblocking(handle, 1) == 0 else { throw .unavailable(lastErrorMessage) }
    }

    public func enterPipelineMode() throws(StoreError) {
        guard let handle, PQenterPipelineMode(handle) == 1 else { throw .unavailable(lastErrorMessage) }
    }

    public var isInPipelineMode: Bool {
        handle.map { PQpipelineStatus($0) != PQ_PIPELINE_OFF } ?? false
    }

    /// Queues one statement with text parameters (extended protocol; never the simple protocol,
    /// so values are never spliced into SQL). Returns false when the connection failed.
    public func send(_ sql: String, _ parameters: [String?] = []) -> Bool {
        guard let handle else { return false }
        return withCStrings(parameters) { values in
            PQsendQueryParams(handle, sql, Int32(parameters.count), nil, values, nil, nil, 0)
        } == 1
    }

    /// Queues the creation of a named prepared statement (parameter types come from the casts in `sql`).
    /// Its result (command OK or an error) arrives like any statement's.
    public func sendPrepare(name: String, _ sql: String, parameterCount: Int) -> Bool {
        guard let handle else { return false }
        return PQsendPrepare(handle, name, sql, Int32(parameterCount), nil) == 1
    }

    /// Queues the execution of a prepared statement with binary-format parameters, text results.
    func sendPrepared(name: String, _ parameters: PGBinaryParameters) -> Bool {
        guard let handle else { return false }
        let n = parameters.count
        let lengths = parameters.ranges.map { Int32($0.count) }
        let formats = [Int32](repeating: 1, count: n)
        // The pointers point into `parameters.bytes` and live only for the call:
        // libpq copies every parameter into its output buffer before PQsendQueryPrepared returns.
        return parameters.bytes.withUnsafeBufferPointer { buffer -> Int32 in
            let base = UnsafeRawPointer(buffer.baseAddress!).assumingMemoryBound(to: CChar.self)
            let values: [UnsafePointer<CChar>?] = parameters.ranges.map { base + $0.lowerBound }
            return PQsendQueryPrepared(handle, name, Int32(n), values, lengths, formats, 0)
        } == 1
    }

    /// Marks the end of a pipeline segment: the server answers with a PGRES_PIPELINE_SYNC result,
    /// and an error before it aborts only the statements up to it.
    public func sendSync() -> Bool {
        guard let handle else { return false }
        return PQpipelineSync(handle) == 1
    }

    /// Sends buffered output. 0: all sent; 1: more remains (wait for writability); -1: failed.
    public func flush() -> Int32 {
        guard let handle else { return -1 }
        return PQflush(handle)
    }

    /// Reads what the socket has. False when the connection failed.
    public func consumeInput() -> Bool {
        guard let handle else { return false }
        return PQconsumeInput(handle) == 1
    }

    public var isBusy: Bool { handle.map { PQisBusy($0) == 1 } ?? false }

    /// The next result if it can be had without blocking. In pipeline mode a nil between two
    /// statements' results marks the end of one statement's results.
    public enum Next {
        case result(PGResult)
        case endOfStatement
        case wouldBlock
    }

    public func nextResult() -> Next {
        guard let handle else { return .wouldBlock }
        if PQisBusy(handle) == 1 { return .wouldBlock }
        guard let raw = PQgetResult(handle) else { return .endOfStatement }
        return .result(PGResult(raw))
    }

    public var isBad: Bool { handle.map { PQstatus($0) == CONNECTION_BAD } ?? true }
}

/// Runs `body` with the strings as a C array of NUL-terminated strings (nil for SQL NULL).
/// The copies live only for the call: libpq copies parameters into its output buffer before returning.
func withCStrings<R>(_ strings: [String?], _ body: (UnsafePointer<UnsafePointer<CChar>?>?) -> R) -> R {
    if strings.isEmpty { return body(nil) }
    var pointers: [UnsafeMutablePointer<CChar>?] = strings.map { s in s.map { strdup($0) } }
    defer { for p in pointers { free(p) } }
    return pointers.withUnsafeMutableBufferPointer { buffer in
        buffer.baseAddress!.withMemoryRebound(to: UnsafePointer<CChar>?.self, capacity: buffer.count) { body($0) }
    }
}

/// Connection-string hardening: libpq's defaults can hang on a black-holed server for hours.
public enum ConnectionString {
    static let defaults: [(String, String)] = [
        ("keepalives", "1"), ("keepalives_idle", "10"), ("keepalives_interval", "5"),
        ("keepalives_count", "3"), ("tcp_user_timeout", "30000"), ("connect_timeout", "10"),
        ("application_name", "herald"),
    ]

    /// Adds keepalive, user-timeout and connect-timeout settings unless the string already sets them.
    public static func hardened(_ conninfo: String) -> String {
        let isURL = conninfo.hasPrefix("postgres://") || conninfo.hasPrefix("postgresql://")
        var out = conninfo
        for (key, value) in defaults where !conninfo.contains(key + "=") {
            if isURL {
                out += (out.contains("?") ? "&" : "?") + key + "=" + value
            } else {
                out += (out.isEmpty ? "" : " ") + key + "=" + value
            }
        }
        return out
    }

    /// A connection string libpq cannot parse (neither key=value pairs nor a postgres:// URL),
    /// told as such: libpq's connect fails on it like on a server it cannot reach. Nil when it parses.
    public static func parseFailure(_ conninfo: String) -> StoreError? {
        var message: UnsafeMutablePointer<CChar>?
        if let options = PQconninfoParse(conninfo, &message) {
            PQconninfoFree(options)
            return nil
        }
        defer { if let message { PQfreemem(message) } }
        let why = message.map { String(cString: $0).trimmingTrailingNewlines } ?? "libpq could not parse it"
        return .configuration("The database URL does not parse (\(why)). Give a libpq connection string "
            + "(host=db.internal dbname=herald user=herald) or a URL (postgres://herald@db.internal/herald).")
    }

    /// The options libpq reports as set (`PQconninfo` or `PQconninfoParse`), in its order.
    static func settings(_ options: UnsafeMutablePointer<PQconninfoOption>) -> [(keyword: String, value: String)] {
        var out: [(keyword: String, value: String)] = []
        var o = options
        while let keyword = o.pointee.keyword {
            if let value = o.pointee.val { out.append((String(cString: keyword), String(cString: value))) }
            o += 1
        }
        return out
    }

    /// `settings` as a key=value string, each value in single quotes with its backslashes and
    /// quotes escaped.
    static func keywordString(_ settings: [(keyword: String, value: String)]) -> String {
        settings.map { setting in
            var quoted = "'"
            for c in setting.value {
                if c == "\\" || c == "'" { quoted.append("\\") }
                quoted.append(c)
            }
            return setting.keyword + "=" + quoted + "'"
        }.joined(separator: " ")
    }
}

extension PGConnection {
    /// Runs a script of several statements (simple protocol, no parameters): migrations only,
    /// whose text is fixed at build time. Never used with values from a request.
    public func executeScript(_ sql: String) throws(StoreError) {
        guard isOpen else { throw .unavailable(lastErrorMessage) }
        guard let raw = PQexec(rawHandle, sql) else { throw .unavailable(lastErrorMessage) }
        let result = PGResult(raw)
        if let error = result.error { throw error }
    }
}

extension PGConnection {
    /// Streams rows into `COPY … FROM STDIN` (text, or binary when `sql` says so: the chunks are
    /// sent as they are) and waits for the result; returns rows copied.
    /// Blocking: for benchmarks, import and tools.
    @discardableResult
    public func copyIn(_ sql: String, chunks: some Sequence<[UInt8]>) throws(StoreError) -> Int64 {
        guard isOpen, let h = rawHandle else { throw .unavailable(lastErrorMessage) }
        guard let start = PQexec(h, sql) else { throw .unavailable(lastErrorMessage) }
        let started = PGResult(start)
        guard started.status == PGRES_COPY_IN else { throw started.error ?? .unavailable(lastErrorMessage) }
        for chunk in chunks {
            let ok = chunk.withUnsafeBufferPointer { buffer in
                buffer.baseAddress!.withMemoryRebound(to: CChar.self, capacity: buffer.count) {
                    PQputCopyData(h, $0, Int32(buffer.count))
                }
            }
            guard ok == 1 else { throw .unavailable(lastErrorMessage) }
        }
        guard PQputCopyEnd(h, nil) == 1 else { throw .unavailable(lastErrorMessage) }
        var copied: Int64 = 0
        while let raw = PQgetResult(h) {
            let r = PGResult(raw)
            if let error = r.error { throw error }
            copied = Int64(String(cString: PQcmdTuples(raw))) ?? copied
        }
        return copied
    }
}
