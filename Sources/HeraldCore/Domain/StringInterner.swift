// Repeated long strings read from stored bodies (app ids, placeholders) shared instead of rebuilt.
#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif

/// A small direct-mapped cache from UTF-8 bytes to a `String` with those bytes.
///
/// Why: decoding a stored submit builds the same app id (`com.example.news`: 16 bytes, too long
/// for Swift's inline small strings) once per event — a heap allocation, a UTF-8 validation and a
/// free each time. Sharing one string also makes later equality checks an identity check (the
/// engine looks the app up in several dictionaries per decision). Short strings (inline in a
/// `String`, no allocation) still cost a UTF-8 validation to build, more than a lookup here.
/// Bounded: a slot holds the last string that hashed to it.
public final class StringInterner {
    /// A fixed buffer rather than an array property: a class's `var` is checked for exclusive
    /// access at run time on every read and write (measured: a third of a lookup's cost).
    private let slots: UnsafeMutablePointer<String?>
    private let mask: Int

    /// A cache of `slots` entries (rounded up to a power of two).
    public init(slots: Int = 256) {
        var n = 1
        while n < slots { n <<= 1 }
        self.slots = .allocate(capacity: n)
        self.slots.initialize(repeating: nil, count: n)
        mask = n - 1
    }

    deinit {
        slots.deinitialize(count: mask + 1)
        slots.deallocate()
    }

    /// A string with exactly the (valid UTF-8) `bytes`: a cached one when one matches.
    public func string(_ bytes: UnsafeRawBufferPointer) -> String {
        guard bytes.count > 0, bytes.count <= 128, let p = bytes.baseAddress else {
            return String(decoding: bytes, as: UTF8.self)
        }
        var h: UInt64 = UInt64(bytes.count) &* 0x9E37_79B9_7F4A_7C15
        if bytes.count >= 8 {
            h = (h ^ p.loadUnaligned(as: UInt64.self)) &* 0xFF51_AFD7_ED55_8CCD
            h = (h ^ p.loadUnaligned(fromByteOffset: bytes.count - 8, as: UInt64.self)) &* 0xC4CE_B9FE_1A85_EC53
        } else {
            var x: UInt64 = 0
            withUnsafeMutableBytes(of: &x) { $0.copyMemory(from: bytes) }
            h = (h ^ x) &* 0xFF51_AFD7_ED55_8CCD
        }
        let i = Int(truncatingIfNeeded: h >> 32) & mask
        if let cached = slots[i] {
            let same = cached.utf8.withContiguousStorageIfAvailable { c in
                c.count == bytes.count && memcmp(c.baseAddress!, p, c.count) == 0
            }
            if same == true { return cached }
        }
        let s = String(decoding: bytes, as: UTF8.self)
        slots[i] = s
        return s
    }
}
