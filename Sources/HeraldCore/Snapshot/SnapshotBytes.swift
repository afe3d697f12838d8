// The byte writer and reader of the snapshot format: varints, strings, instants (no I/O).
#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif

/// Appends the snapshot encoding's primitives to a byte array: LEB128 varints (zigzag for
/// signed values), length-prefixed UTF-8 strings, optionals as a presence byte.
public struct SnapshotWriter {
    public private(set) var bytes: [UInt8] = []

    public init(capacity: Int = 0) { bytes.reserveCapacity(capacity) }

    public mutating func removeAll(keepingCapacity: Bool = true) { bytes.removeAll(keepingCapacity: keepingCapacity) }

    public mutating func u8(_ v: UInt8) { bytes.append(v) }
    public mutating func bool(_ v: Bool) { bytes.append(v ? 1 : 0) }

    /// One append per value: a byte at a time, each append would check the array's uniqueness
    /// and capacity, a large share of a snapshot capture's time.
    public mutating func varint(_ v: UInt64) {
        if v < 0x80 { bytes.append(UInt8(v)); return }
        var encoded: (UInt64, UInt64) = (0, 0)   // room for the 10 bytes of the largest value
        withUnsafeMutableBytes(of: &encoded) { raw in
            let b = raw.bindMemory(to: UInt8.self)
            var v = v, n = 0
            while v >= 0x80 {
                b[n] = UInt8(truncatingIfNeeded: v) | 0x80
                v >>= 7
                n += 1
            }
            b[n] = UInt8(v)
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: b[...n]))
        }
    }

    public mutating func int(_ v: Int64) { varint(UInt64(bitPattern: (v << 1) ^ (v >> 63))) }
    public mutating func count(_ n: Int) { varint(UInt64(n)) }

    public mutating func string(_ s: String) {
        s.withUTF8Bytes { b in
            varint(UInt64(b.count))
            bytes.append(contentsOf: b)
        }
    }

    public mutating func optString(_ s: String?) {
        if let s { u8(1); string(s) } else { u8(0) }
    }

    public mutating func instant(_ t: Instant) { int(t.millisecondsSinceEpoch) }

    public mutating func optInstant(_ t: Instant?) {
        if let t { u8(1); instant(t) } else { u8(0) }
    }

    /// Appends another encoding's bytes, prefixed with their length.
    public mutating func block(_ other: [UInt8]) {
        count(other.count)
        bytes.append(contentsOf: other)
    }
}

/// A malformed snapshot: restore ignores the snapshot and folds the log instead.
public struct SnapshotFormatError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Reads what `SnapshotWriter` wrote, from borrowed bytes (valid while the reader is used).
public struct SnapshotReader {
    let base: UnsafeRawBufferPointer
    public private(set) var position = 0
    /// App names and other repeated strings decoded once and shared (one heap copy for a
    /// million users' "com.example.news").
    public var interned: [String: String] = [:]
    var lastShared: (bytes: [UInt8], string: String)?

    public init(_ bytes: UnsafeRawBufferPointer) { base = bytes }

    public var isAtEnd: Bool { position >= base.count }

    public mutating func u8() throws(SnapshotFormatError) -> UInt8 {
        guard position < base.count else { throw SnapshotFormatError("snapshot ends early at byte \(position)") }
        defer { position += 1 }
        return base[position]
    }

    public mutating func bool() throws(SnapshotFormatError) -> Bool { try u8() != 0 }

    public mutating func varint() throws(SnapshotFormatError) -> UInt64 {
        var v: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let b = try u8()
            v |= UInt64(b & 0x7F) << shift
            if b < 0x80 { return v }
            shift += 7
            guard shift < 64 else { throw SnapshotFormatError("varint too long at byte \(position)") }
        }
    }

    public mutating func int() throws(SnapshotFormatError) -> Int64 {
        let u = try varint()
        return Int64(bitPattern: (u >> 1) ^ (0 &- (u & 1)))
    }

    public mutating func count(limit: Int = 1 << 30) throws(SnapshotFormatError) -> Int {
        let n = try varint()
        guard n <= UInt64(limit) else { throw SnapshotFormatError("count \(n) too large at byte \(position)") }
        return Int(n)
    }

    public mutating func rawBytes() throws(SnapshotFormatError) -> UnsafeRawBufferPointer {
        let n = try count(limit: base.count - position)
        defer { position += n }
        return UnsafeRawBufferPointer(rebasing: base[position..<(position + n)])
    }

    public mutating func string() throws(SnapshotFormatError) -> String {
        String(decoding: try rawBytes(), as: UTF8.self)
    }

    /// A string likely repeated across users (app names, Focus names): one shared copy. The
    /// last one is compared byte for byte first (no hashing: most users share one app).
    public mutating func sharedString() throws(SnapshotFormatError) -> String {
        let raw = try rawBytes()
        if let last = lastShared, last.bytes.count == raw.count,
           raw.count == 0 || last.bytes.withUnsafeBytes({ memcmp($0.baseAddress!, raw.baseAddress!, raw.count) == 0 }) {
            return last.string
        }
        let s = String(decoding: raw, as: UTF8.self)
        defer { if let shared = interned[s] { lastShared = (Array(raw), shared) } }
        if let known = interned[s] { return known }
        if interned.count < 100_000 { interned[s] = s }
        return s
    }

    public mutating func optString() throws(SnapshotFormatError) -> String? {
        try u8() == 0 ? nil : try string()
    }

    public mutating func instant() throws(SnapshotFormatError) -> Instant { Instant(millisecondsSinceEpoch: try int()) }

    public mutating func optInstant() throws(SnapshotFormatError) -> Instant? {
        try u8() == 0 ? nil : try instant()
    }
}
