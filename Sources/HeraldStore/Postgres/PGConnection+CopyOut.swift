// COPY … TO STDOUT counted or kept: the read-side ceiling the replay and restart benchmarks compare
// against, and the bytes the ingest benchmark's schema ceiling copies back in.
import CLibPQ

extension PGConnection {
    /// Runs a binary `COPY … TO STDOUT` through the same reader replay uses (`PGCopyOut`) and
    /// only counts what arrives: (rows, bytes of CopyData). Blocking; for benchmarks and tools.
    @discardableResult
    public func copyOut(_ sql: String) throws(StoreError) -> (rows: Int64, bytes: Int64) {
        let copy = try PGCopyOut(self, sql: sql)
        var rows: Int64 = 0
        while try copy.next() != nil { rows += 1 }
        return (rows, copy.bytesRead)
    }

    /// The CopyData of a `COPY … TO STDOUT` as it arrives, gathered into chunks of about
    /// `chunkBytes`: with `(FORMAT binary)`, a stream `copyIn` of a `COPY … FROM STDIN (FORMAT
    /// binary)` with the same columns takes as it is. Blocking; for benchmarks and tools.
    public func copyOutData(_ sql: String, chunkBytes: Int = 1 << 20) throws(StoreError) -> [[UInt8]] {
        guard isOpen, let h = rawHandle else { throw .unavailable(lastErrorMessage) }
        guard let raw = PQexec(h, sql) else { throw .unavailable(lastErrorMessage) }
        let started = PGResult(raw)
        guard started.status == PGRES_COPY_OUT else {
            throw started.error ?? .unavailable("COPY did not start: \(lastErrorMessage)")
        }
        var chunks: [[UInt8]] = [], chunk: [UInt8] = []
        while true {
            var p: UnsafeMutablePointer<CChar>?
            let n = Int(PQgetCopyData(h, &p, 0))
            if n == -1 { break }
            guard n > 0, let p else { throw .unavailable("COPY stream broke: \(lastErrorMessage)") }
            chunk.append(contentsOf: UnsafeRawBufferPointer(start: p, count: n))
            PQfreemem(p)
            if chunk.count >= chunkBytes { chunks.append(chunk); chunk = [] }
        }
        while let raw = PQgetResult(h) {
            if let error = PGResult(raw).error { throw error }
        }
        if !chunk.isEmpty { chunks.append(chunk) }
        return chunks
    }
}
