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

    /// COPY data of `total` bytes (framing included), the tuples written by `tuples` into a
    /// buffer of exactly that size between the header and the trailer.
    static func data(total: Int, _ tuples: (inout BigEndianWriter) -> Void) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: total) { buffer, initialized in
            var w = BigEndianWriter(base: UnsafeMutableRawPointer(buffer.baseAddress!))
            signature.withUnsafeBytes { w.copy($0) }
            w.be32(0)          // flags: no OIDs
            w.be32(0)          // header extension length
            tuples(&w)
            w.be16(0xFFFF)     // trailer: field count -1
            precondition(w.at == total, "binary COPY data: wrote \(w.at) bytes of \(total)")
            initialized = total
        }
    }

    /// Adds `base` to the first field of every tuple of `data` (encoded at base 0), in place: one
    /// pass over the fields' lengths, no allocation.
    static func rebase(_ data: inout [UInt8], by base: Int64) {
        guard base != 0 else { return }
        data.withUnsafeMutableBytes { bytes in
            let p = bytes.baseAddress!
            let end = bytes.count
            var at = headerSize
            while at + 2 <= end {
                let fields = Int(UInt16(bigEndian: p.loadUnaligned(fromByteOffset: at, as: UInt16.self)))
                at += 2
                if fields == 0xFFFF { return }   // trailer
                precondition(fields > 0 && Int32(bigEndian: p.loadUnaligned(fromByteOffset: at, as: Int32.self)) == 8,
                             "binary COPY data: a tuple's first field is not an int8 position")
                let position = Int64(bigEndian: p.loadUnaligned(fromByteOffset: at + 4, as: Int64.self)) + base
                p.storeBytes(of: position.bigEndian, toByteOffset: at + 4, as: Int64.self)
                for _ in 0..<fields {
                    let length = Int(Int32(bigEndian: p.loadUnaligned(fromByteOffset: at, as: Int32.self)))
                    at += 4 + max(length, 0)   // -1: NULL, no bytes
                }
            }
            preconditionFailure("binary COPY data without its trailer")
        }
    }
}
