// Writes PostgreSQL's binary wire formats (COPY data, binary parameters) into a buffer sized beforehand.
import HeraldCore

/// Big-endian integers and raw bytes written at a cursor into memory the caller sized exactly
/// (the binary COPY of deliveries and the binary array parameters of the append functions).
struct BigEndianWriter {
    let base: UnsafeMutableRawPointer
    var at = 0

    init(base: UnsafeMutableRawPointer) { self.base = base }

    mutating func be16(_ v: UInt16) {
        (base + at).storeBytes(of: v.bigEndian, as: UInt16.self)
        at += 2
    }

    mutating func be32(_ v: UInt32) {
        (base + at).storeBytes(of: v.bigEndian, as: UInt32.self)
        at += 4
    }

    mutating func be64(_ v: UInt64) {
        (base + at).storeBytes(of: v.bigEndian, as: UInt64.self)
        at += 8
    }

    mutating func copy(_ bytes: UnsafeRawBufferPointer) {
        guard let source = bytes.baseAddress, bytes.count > 0 else { return }
        copyBytes(to: base + at, from: source, count: bytes.count)
        at += bytes.count
    }
}

/// The field forms of binary COPY tuples (`EventCopy`, `DeliveryCopy`): each field is its byte
/// length, then its bytes (-1 and nothing for NULL).
extension BigEndianWriter {
    /// A text field: its length and UTF-8 bytes, or -1 for NULL.
    mutating func text(_ value: String?) {
        guard let value else { be32(UInt32(bitPattern: -1)); return }
        value.withUTF8Bytes { be32(UInt32($0.count)); copy(UnsafeRawBufferPointer($0)) }
    }

    /// A text field given as its UTF-8 bytes.
    mutating func text(bytes: [UInt8]) {
        bytes.withUnsafeBytes { be32(UInt32($0.count)); copy($0) }
    }

    /// An `int4` field: its length (4) and the value.
    mutating func int4(_ value: Int32) {
        be32(4); be32(UInt32(bitPattern: value))
    }

    /// An `int8` field: its length (8) and the value.
    mutating func int8(_ value: Int64) {
        be32(8); be64(UInt64(bitPattern: value))
    }

    /// A `timestamptz` field: microseconds since PostgreSQL's epoch (2000-01-01).
    mutating func timestamptz(_ t: Instant) {
        int8((t.millisecondsSinceEpoch - PGBinaryParameters.postgresEpochMilliseconds) * 1000)
    }
}
