// Writes PostgreSQL's binary wire formats (COPY data, binary parameters) into a buffer sized beforehand.

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
        (base + at).copyMemory(from: source, byteCount: bytes.count)
        at += bytes.count
    }
}

extension String {
    /// The string's UTF-8 bytes, in place for a native string; only a bridged one is copied
    /// (`var` + `withUTF8`, as every text field of the COPY encoders did before session 9).
    @inline(__always) func withUTF8Bytes<R>(_ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        if let r = utf8.withContiguousStorageIfAvailable(body) { return r }
        var bridged = self
        return bridged.withUTF8(body)
    }
}
