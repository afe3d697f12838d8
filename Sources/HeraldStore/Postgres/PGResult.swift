// A libpq result, owned: cleared exactly once when the Swift value goes away.
import CLibPQ

/// One `PGresult`. Values are read as text (the store only uses text-format results).
public final class PGResult {
    /// Owned pointer: libpq allocates it, this object is its only owner and `PQclear`s it in deinit.
    let handle: OpaquePointer

    init(_ handle: OpaquePointer) { self.handle = handle }
    deinit { PQclear(handle) }

    public var status: ExecStatusType { PQresultStatus(handle) }
    public var rowCount: Int { Int(PQntuples(handle)) }
    public var columnCount: Int { Int(PQnfields(handle)) }

    /// True for results that report success (a command, rows, or a pipeline sync).
    public var isSuccess: Bool {
        switch status {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_SINGLE_TUPLE, PGRES_PIPELINE_SYNC, PGRES_COPY_IN, PGRES_COPY_OUT:
            return true
        default:
            return false
        }
    }

    public func isNull(_ row: Int, _ column: Int) -> Bool {
        PQgetisnull(handle, Int32(row), Int32(column)) != 0
    }

    /// The text value of a cell, nil when SQL NULL.
    public func string(_ row: Int, _ column: Int) -> String? {
        if isNull(row, column) { return nil }
        guard let p = PQgetvalue(handle, Int32(row), Int32(column)) else { return nil }
        return String(cString: p)
    }

    public func int64(_ row: Int, _ column: Int) -> Int64? {
        string(row, column).flatMap { Int64($0) }
    }

    public func bool(_ row: Int, _ column: Int) -> Bool? {
        string(row, column).map { $0 == "t" }
    }

    /// The raw bytes of a cell (text format), without a String round trip.
    public func bytes(_ row: Int, _ column: Int) -> [UInt8]? {
        if isNull(row, column) { return nil }
        guard let p = PQgetvalue(handle, Int32(row), Int32(column)) else { return nil }
        let n = Int(PQgetlength(handle, Int32(row), Int32(column)))
        return p.withMemoryRebound(to: UInt8.self, capacity: n) { Array(UnsafeBufferPointer(start: $0, count: n)) }
    }

    /// Calls `body` with the cell's bytes in place (text format; empty for SQL NULL), valid only inside `body`.
    public func withBytes<T>(_ row: Int, _ column: Int, _ body: (UnsafeRawBufferPointer) -> T) -> T {
        guard !isNull(row, column), let p = PQgetvalue(handle, Int32(row), Int32(column)) else {
            return body(UnsafeRawBufferPointer(start: nil, count: 0))
        }
        return body(UnsafeRawBufferPointer(start: UnsafeRawPointer(p), count: Int(PQgetlength(handle, Int32(row), Int32(column)))))
    }

    /// A non-negative integer cell parsed from its text in place (nil for NULL or anything else).
    public func decimal(_ row: Int, _ column: Int) -> Int64? {
        withBytes(row, column) { b -> Int64? in
            guard !b.isEmpty, b.count <= 18 else { return nil }
            var v: Int64 = 0
            for byte in b {
                guard byte >= 0x30 && byte <= 0x39 else { return nil }
                v = v * 10 + Int64(byte - 0x30)
            }
            return v
        }
    }

    /// The server's error for a failed result, mapped to a store error in one place (`StoreError`).
    public var error: StoreError? {
        if isSuccess { return nil }
        func field(_ code: Int32) -> String? {
            PQresultErrorField(handle, code).map { String(cString: $0) }
        }
        let message = field(HERALD_PG_DIAG_MESSAGE_PRIMARY)
            ?? PQresultErrorMessage(handle).map { String(cString: $0) } ?? "unknown error"
        return StoreError.fromServer(
            sqlstate: field(HERALD_PG_DIAG_SQLSTATE) ?? "",
            message: message,
            detail: field(HERALD_PG_DIAG_MESSAGE_DETAIL),
            hint: field(HERALD_PG_DIAG_MESSAGE_HINT),
            constraint: field(HERALD_PG_DIAG_CONSTRAINT_NAME)
        )
    }
}
