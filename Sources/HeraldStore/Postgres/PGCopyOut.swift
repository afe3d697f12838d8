// Streams the rows of `COPY (…) TO STDOUT (FORMAT binary)`: no result set in memory, no text parsing.
import CLibPQ

/// A pull reader of a binary COPY: `next()` hands out one row at a time while PostgreSQL keeps
/// producing the following ones into the socket (the server works on its core while Herald
/// works on its own). Replay and start-up read the whole log this way: a paged `SELECT` waits
/// one round trip per page and builds every cell as a C string first.
///
/// Blocking: for tools and start-up. The connection can run nothing else until `next()` has
/// returned nil (or the reader is dropped, which drains the rest).
public final class PGCopyOut {
    private let connection: PGConnection
    /// The current row's buffer, owned (libpq allocates it; freed on the next call or at the end).
    /// `@exclusivity(unchecked)` here and below: a class's `var` is otherwise checked for
    /// exclusive access at run time on every use (~1% of replay); only `next()` touches them,
    /// from one thread.
    @exclusivity(unchecked) private var buffer: UnsafeMutablePointer<CChar>?
    @exclusivity(unchecked) private var sawHeader = false
    @exclusivity(unchecked) private var finished = false
    /// Field offsets and lengths of the current row (length -1 for NULL), reused for every row.
    private let offsets = UnsafeMutablePointer<Int>.allocate(capacity: PGCopyOut.maxFields)
    private let lengths = UnsafeMutablePointer<Int>.allocate(capacity: PGCopyOut.maxFields)
    @exclusivity(unchecked) private var fieldCount = 0
    /// Bytes of CopyData received so far (header and trailer included).
    @exclusivity(unchecked) public private(set) var bytesRead: Int64 = 0
    static let maxFields = 64

    /// Starts `sql`, which must be a `COPY … TO STDOUT (FORMAT binary)` built from constants and
    /// integers only: COPY takes no parameters.
    public init(_ connection: PGConnection, sql: String) throws(StoreError) {
        self.connection = connection
        guard connection.isOpen, let h = connection.rawHandle else { throw .unavailable(connection.lastErrorMessage) }
        guard let raw = PQexec(h, sql) else { throw .unavailable(connection.lastErrorMessage) }
        let started = PGResult(raw)
        guard started.status == PGRES_COPY_OUT else {
            throw started.error ?? .unavailable("COPY did not start: \(connection.lastErrorMessage)")
        }
    }

    deinit {
        release()
        // Drain what the server still sends so the connection is usable (or at least closed cleanly).
        while !finished, (try? advance()) == true {}
        offsets.deallocate()
        lengths.deallocate()
    }

    /// The next row, nil at the end. The row's bytes stay valid until the next call.
    public func next() throws(StoreError) -> PGCopyRow? {
        guard try advance() else { return nil }
        return PGCopyRow(base: UnsafeRawPointer(buffer!), count: fieldCount, offsets: offsets, lengths: lengths)
    }

    private func release() {
        if let buffer { PQfreemem(buffer) }
        buffer = nil
    }

    /// Moves to the next row; false at the end of the COPY.
    private func advance() throws(StoreError) -> Bool {
        release()
        if finished { return false }
        guard let h = connection.rawHandle else { finished = true; throw .unavailable(connection.lastErrorMessage) }
        var p: UnsafeMutablePointer<CChar>?
        let n = Int(PQgetCopyData(h, &p, 0))
        if n == -1 {
            finished = true
            while let raw = PQgetResult(h) {
                if let error = PGResult(raw).error { throw error }
            }
            return false
        }
        guard n > 0, let p else {
            finished = true
            throw .unavailable("COPY stream broke: \(connection.lastErrorMessage)")
        }
        buffer = p
        bytesRead += Int64(n)
        return try parse(UnsafeRawBufferPointer(start: p, count: n))
    }

    /// Reads the tuple in one CopyData message (the first also carries the file header).
    private func parse(_ data: UnsafeRawBufferPointer) throws(StoreError) -> Bool {
        var at = 0
        func int32(_ i: Int) -> Int { Int(Int32(bitPattern: UInt32(bigEndianBytes: data, at: i))) }
        if !sawHeader {
            // "PGCOPY\n\377\r\n\0", flags (int32), header extension length (int32) + extension.
            guard data.count >= 19, data[0] == 0x50, data[5] == 0x59, data[6] == 0x0A else {
                throw .unavailable("COPY stream has no binary header")
            }
            at = 19 + int32(15)
            sawHeader = true
            if at >= data.count { return try advance() }
        }
        guard at + 2 <= data.count else { throw .unavailable("COPY row truncated") }
        let fields = Int(Int16(bitPattern: UInt16(data[at]) << 8 | UInt16(data[at + 1])))
        at += 2
        if fields == -1 { return try advance() }  // the trailer; -1 from PQgetCopyData follows
        guard fields <= Self.maxFields else { throw .unavailable("COPY row has \(fields) fields; at most \(Self.maxFields) are read") }
        fieldCount = fields
        for i in 0..<fields {
            guard at + 4 <= data.count else { throw .unavailable("COPY row truncated") }
            let length = int32(at)
            at += 4
            offsets[i] = at
            lengths[i] = length
            if length > 0 { at += length }
            guard at <= data.count else { throw .unavailable("COPY row truncated") }
        }
        return true
    }
}

/// One row of a binary COPY, valid until the reader's next `next()`.
public struct PGCopyRow {
    let base: UnsafeRawPointer
    public let count: Int
    let offsets: UnsafePointer<Int>
    let lengths: UnsafePointer<Int>

    public func isNull(_ i: Int) -> Bool { lengths[i] < 0 }

    /// The field's raw bytes; nil for NULL.
    public func bytes(_ i: Int) -> UnsafeRawBufferPointer? {
        lengths[i] < 0 ? nil : UnsafeRawBufferPointer(start: base + offsets[i], count: lengths[i])
    }

    /// A `text`/`json` field (binary format is the UTF-8 bytes).
    public func string(_ i: Int) -> String? {
        bytes(i).map { String(decoding: $0, as: UTF8.self) }
    }

    /// A `bigint` field.
    public func int64(_ i: Int) -> Int64? {
        guard lengths[i] == 8 else { return nil }
        return Int64(bitPattern: UInt64(bigEndianBytes: UnsafeRawBufferPointer(start: base + offsets[i], count: 8), at: 0))
    }

    /// A `timestamptz` field as milliseconds since the Unix epoch (binary: µs since 2000-01-01).
    public func timestampMilliseconds(_ i: Int) -> Int64? {
        guard let micros = int64(i) else { return nil }
        let ms = micros >= 0 ? micros / 1000 : -((-micros + 999) / 1000)
        return ms + 946_684_800_000
    }
}

extension UInt64 {
    init(bigEndianBytes data: UnsafeRawBufferPointer, at i: Int) {
        self = UInt64(bigEndian: data.loadUnaligned(fromByteOffset: i, as: UInt64.self))
    }
}

extension UInt32 {
    init(bigEndianBytes data: UnsafeRawBufferPointer, at i: Int) {
        self = UInt32(bigEndian: data.loadUnaligned(fromByteOffset: i, as: UInt32.self))
    }
}
