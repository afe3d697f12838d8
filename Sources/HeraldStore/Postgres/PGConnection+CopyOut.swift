// COPY … TO STDOUT counted: the read-side ceiling the replay and restart benchmarks compare against.

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
}
