// COPY … TO STDOUT: the read-side ceiling the replay benchmark compares against.
import CLibPQ

extension PGConnection {
    /// Runs `COPY … TO STDOUT` (any format) and hands each chunk libpq returns to `body`, blocking.
    /// Returns (rows, bytes) read. For benchmarks and tools.
    @discardableResult
    public func copyOut(_ sql: String, _ body: (UnsafeRawBufferPointer) -> Void = { _ in }) throws(StoreError) -> (rows: Int64, bytes: Int64) {
        guard isOpen, let h = rawHandle else { throw .unavailable(lastErrorMessage) }
        guard let start = PQexec(h, sql) else { throw .unavailable(lastErrorMessage) }
        let started = PGResult(start)
        guard started.status == PGRES_COPY_OUT else { throw started.error ?? .unavailable(lastErrorMessage) }
        var bytes: Int64 = 0
        while true {
            var buffer: UnsafeMutablePointer<CChar>?
            let n = PQgetCopyData(h, &buffer, 0)
            if n > 0, let buffer {
                body(UnsafeRawBufferPointer(start: buffer, count: Int(n)))
                bytes += Int64(n)
                PQfreemem(buffer)
            } else if n == -1 {
                break
            } else {
                throw .unavailable(lastErrorMessage)
            }
        }
        var rows: Int64 = 0
        while let raw = PQgetResult(h) {
            let r = PGResult(raw)
            if let error = r.error { throw error }
            rows = Int64(String(cString: PQcmdTuples(raw))) ?? rows
        }
        return (rows, bytes)
    }
}
