// What the two COPY encoders share: the binary format's signature, and moving a batch to its positions.

/// PostgreSQL's binary COPY format, as `EventCopy` and `DeliveryCopy` write it: a header, one
/// tuple per row whose first field is the row's position (`seq` or `cursor`, an int8), a trailer.
/// A batch is encoded before its positions are claimed (at base 0: positions 1 … n) and moved to
/// them with `rebase` once PostgreSQL answers, so the encoding overlaps the round trip instead of
/// keeping PostgreSQL waiting for the data after its COPY_IN.
enum BinaryCopy {
    /// The file header's signature ("PGCOPY\n\377\r\n\0").
    static let signature: [UInt8] = [0x50, 0x47, 0x43, 0x4F, 0x50, 0x59, 0x0A, 0xFF, 0x0D, 0x0A, 0x00]
    /// Signature, flags and header-extension length.
    static let headerSize = 19
    /// The header and the trailer (a field count of -1).
    static let framingSize = headerSize + 2

    /// COPY data of `total` bytes (framing included) for `rows` tuples, the tuples written by
    /// `tuples` into a buffer of exactly that size between the header and the trailer; `tuples`
    /// notes where each tuple's position value starts (`CopyData.positionOffsets`).
    static func data(total: Int, rows: Int, _ tuples: (inout BigEndianWriter, inout [Int32]) -> Void) -> CopyData {
        precondition(total < Int(Int32.max), "binary COPY data of \(total) bytes: a transaction holds far fewer rows")
        var offsets: [Int32] = []
        offsets.reserveCapacity(rows)
        let bytes = [UInt8](unsafeUninitializedCapacity: total) { buffer, initialized in
            var w = BigEndianWriter(base: UnsafeMutableRawPointer(buffer.baseAddress!))
            signature.withUnsafeBytes { w.copy($0) }
            w.be32(0)          // flags: no OIDs
            w.be32(0)          // header extension length
            tuples(&w, &offsets)
            w.be16(0xFFFF)     // trailer: field count -1
            precondition(w.at == total, "binary COPY data: wrote \(w.at) bytes of \(total)")
            initialized = total
        }
        precondition(offsets.count == rows, "binary COPY data: \(offsets.count) positions noted for \(rows) rows")
        return CopyData(bytes: bytes, positionOffsets: offsets)
    }

    /// Adds `base` to every tuple's position (encoded at base 0), in place: one load and store
    /// per tuple, at the offsets noted while encoding. Walking the fields' lengths to find them
    /// would touch most of the batch's cache lines again, long after they were written.
    static func rebase(_ data: inout CopyData, by base: Int64) {
        guard base != 0 else { return }
        let offsets = data.positionOffsets
        data.bytes.withUnsafeMutableBytes { bytes in
            let p = bytes.baseAddress!
            for offset in offsets {
                let at = Int(offset)
                precondition(Int32(bigEndian: p.loadUnaligned(fromByteOffset: at - 4, as: Int32.self)) == 8,
                             "binary COPY data: a tuple's position is not an int8")
                let position = Int64(bigEndian: p.loadUnaligned(fromByteOffset: at, as: Int64.self)) + base
                p.storeBytes(of: position.bigEndian, toByteOffset: at, as: Int64.self)
            }
        }
    }
}

extension BigEndianWriter {
    /// A tuple's position (`seq` or `cursor`, its first field): an int8, the offset of its value
    /// (after the 4-byte field length) noted in `offsets` for `BinaryCopy.rebase`.
    mutating func position(_ value: Int64, notingIn offsets: inout [Int32]) {
        offsets.append(Int32(at + 4))
        int8(value)
    }
}

/// A batch's binary COPY data (`BinaryCopy.data`) and the offset of each tuple's position value
/// in it (after its field length), for `BinaryCopy.rebase`.
struct CopyData: Equatable {
    var bytes: [UInt8]
    var positionOffsets: [Int32]
}

/// Binary COPY data cut into whole batches of rows, each a COPY payload of its own (header,
/// tuples, trailer): what a bench needs to store a run's rows again in transactions of the run's
/// size (`herald bench latency`'s group-commit reference).
public enum BinaryCopyBatches {
    /// The tuples of `data` (binary COPY data, as `COPY … TO STDOUT (FORMAT binary)` writes it,
    /// possibly in several chunks) in payloads of `rowsPerBatch` rows (the last may hold fewer),
    /// each with its number of rows.
    /// Nil when the data is not binary COPY data (a signature, flags or tuple that does not parse).
    public static func split(_ chunks: [[UInt8]], rowsPerBatch: Int) -> [(payload: [UInt8], rows: Int)]? {
        precondition(rowsPerBatch > 0, "a batch holds at least one row")
        let data = chunks.count == 1 ? chunks[0] : Array(chunks.joined())
        guard data.count >= BinaryCopy.framingSize, Array(data.prefix(BinaryCopy.signature.count)) == BinaryCopy.signature else { return nil }
        func be32(_ at: Int) -> Int32 {
            data.withUnsafeBytes { Int32(bitPattern: UInt32(bigEndianBytes: $0, at: at)) }
        }
        guard be32(11) == 0 else { return nil }   // flags: no OIDs
        var at = BinaryCopy.headerSize + Int(be32(15))   // past the header extension
        guard at <= data.count else { return nil }
        let header = Array(data[0..<at])
        var batches: [(payload: [UInt8], rows: Int)] = []
        var batch = header, rows = 0
        while at + 2 <= data.count {
            let fields = Int16(bitPattern: UInt16(data[at]) << 8 | UInt16(data[at + 1]))
            if fields == -1 { break }
            guard fields >= 0 else { return nil }
            let start = at
            at += 2
            for _ in 0..<fields {
                guard at + 4 <= data.count else { return nil }
                let length = Int(be32(at))
                at += 4 + max(length, 0)   // -1: NULL, no bytes
                guard at <= data.count else { return nil }
            }
            batch += data[start..<at]
            rows += 1
            if rows == rowsPerBatch {
                batches.append((batch + [0xFF, 0xFF], rows))
                batch = header; rows = 0
            }
        }
        if rows > 0 { batches.append((batch + [0xFF, 0xFF], rows)) }
        return batches
    }
}
