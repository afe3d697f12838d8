// Names (user ids, app ids) read from COPY rows, numbered densely by their bytes.
import HeraldCore
#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif

/// Gives each distinct name a dense ordinal (0, 1, 2, …) and keeps one `String` per name.
///
/// Why: replay reads a user id with every event and every stored delivery. Looking the bytes
/// up here costs one cheap hash and one `memcmp`; building a `String` from them and hashing it
/// into a `Dictionary` costs many times that (SipHash, UTF-8 validation). The
/// strings handed out are shared, so equal names compare by identity afterwards.
struct NameTable {
    /// Open addressing: a slot holds ordinal + 1 (0 = empty). The count of slots is a power of
    /// two, at most half full.
    private var slots: [Int32]
    private var hashes: [UInt64] = []
    /// Every name's bytes, back to back; name `o` is `bytes[offsets[o]..<offsets[o + 1]]`.
    private var bytes: [UInt8] = []
    private var offsets: [Int] = [0]
    /// The names as strings, by ordinal.
    private(set) var names: [String] = []
    /// Per table, so crafted names cannot be chosen to collide in advance.
    private let seed = UInt64.random(in: .min ... .max)

    init(capacity: Int = 1024) {
        var n = 16
        while n < capacity * 2 { n <<= 1 }
        slots = [Int32](repeating: 0, count: n)
    }

    var count: Int { names.count }

    /// The ordinal of the name spelled by `name`, added if new.
    mutating func ordinal(of name: UnsafeRawBufferPointer) -> Int {
        let h = NameTable.hash(name, seed: seed)
        let mask = slots.count - 1
        var i = Int(truncatingIfNeeded: h) & mask
        while true {
            let s = slots[i]
            if s == 0 { break }
            let o = Int(s) - 1
            if hashes[o] == h, equals(o, name) { return o }
            i = (i + 1) & mask
        }
        let o = names.count
        slots[i] = Int32(o + 1)
        hashes.append(h)
        bytes.append(contentsOf: name.assumingMemoryBound(to: UInt8.self))
        offsets.append(bytes.count)
        names.append(String(decoding: name, as: UTF8.self))
        if names.count * 2 > slots.count { grow() }
        return o
    }

    /// The ordinal of `name`, added if new.
    mutating func ordinal(of name: String) -> Int {
        return name.withUTF8Bytes { ordinal(of: UnsafeRawBufferPointer($0)) }
    }

    private func equals(_ o: Int, _ name: UnsafeRawBufferPointer) -> Bool {
        let start = offsets[o], n = offsets[o + 1] - start
        guard n == name.count else { return false }
        guard n > 0 else { return true }
        return bytes.withUnsafeBytes { memcmp($0.baseAddress! + start, name.baseAddress!, n) == 0 }
    }

    private mutating func grow() {
        var bigger = [Int32](repeating: 0, count: slots.count * 2)
        let mask = bigger.count - 1
        for (o, h) in hashes.enumerated() {
            var i = Int(truncatingIfNeeded: h) & mask
            while bigger[i] != 0 { i = (i + 1) & mask }
            bigger[i] = Int32(o + 1)
        }
        slots = bigger
    }

    /// A seeded multiply-xor hash over eight bytes at a time (names are short).
    static func hash(_ name: UnsafeRawBufferPointer, seed: UInt64) -> UInt64 {
        var h: UInt64 = seed ^ 0x9E37_79B9_7F4A_7C15 ^ UInt64(name.count)
        guard let p = name.baseAddress else { return h }
        var k = 0
        let n = name.count
        while k + 8 <= n {
            h = (h ^ p.loadUnaligned(fromByteOffset: k, as: UInt64.self)) &* 0xFF51_AFD7_ED55_8CCD
            h ^= h >> 32
            k += 8
        }
        var tail: UInt64 = 0
        var shift: UInt64 = 0
        while k < n {
            tail |= UInt64(p.load(fromByteOffset: k, as: UInt8.self)) << shift
            shift += 8
            k += 1
        }
        h = (h ^ tail) &* 0xC4CE_B9FE_1A85_EC53
        h ^= h >> 29
        return h
    }
}
