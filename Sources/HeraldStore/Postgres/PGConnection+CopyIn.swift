// Non-blocking COPY … FROM STDIN for the writer: leave pipeline mode, send a simple query, stream the data.
import CLibPQ

extension PGConnection {
    /// Leaves pipeline mode. Only possible when every pipelined result has been read (libpq
    /// refuses otherwise: the writer calls it with nothing in flight).
    func exitPipelineMode() throws(StoreError) {
        guard let h = rawHandle, PQexitPipelineMode(h) == 1 else { throw .unavailable(lastErrorMessage) }
    }

    /// Queues a simple-protocol query (several statements, no parameters), outside pipeline mode.
    /// Only for SQL built from constants and integers Herald formats itself — never request values:
    /// the simple protocol has no parameters, and COPY can only start from it or an unnamed statement.
    /// Results arrive one per statement; `nextResult()` returns `.endOfStatement` once all arrived.
    func sendSimpleQuery(_ sql: String) -> Bool {
        guard let h = rawHandle else { return false }
        return PQsendQuery(h, sql) == 1
    }

    /// Queues COPY data (after the COPY_IN result). In non-blocking mode libpq grows its output
    /// buffer rather than refuse, so false means the connection failed or memory ran out; the
    /// owner flushes the buffer as the socket allows (`flush()`).
    func putCopyData(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let h = rawHandle else { return false }
        if bytes.isEmpty { return true }
        return bytes.withMemoryRebound(to: CChar.self) { PQputCopyData(h, $0.baseAddress, Int32($0.count)) } == 1
    }

    /// Ends the COPY data (CopyDone); the COPY's result and those of the statements after it follow.
    func putCopyEnd() -> Bool {
        guard let h = rawHandle else { return false }
        return PQputCopyEnd(h, nil) == 1
    }

    /// True when the server said, at its last ReadyForQuery, that the session is inside a failed
    /// transaction block (a ROLLBACK is needed before anything else runs).
    var isInFailedTransaction: Bool {
        guard let h = rawHandle else { return false }
        return PQtransactionStatus(h) == PQTRANS_INERROR
    }
}
