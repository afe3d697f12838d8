// Copies of a few bytes done inline, without a call to the C library's memcpy.

/// Copies `count` bytes from `source` to `destination` (not overlapping). Up to 32 bytes are
/// moved with at most four unaligned 8-byte loads and stores (overlapping ones for the odd
/// sizes); longer copies go to `memcpy`.
///
/// Why: the encoders append many short pieces — keys, ids, a user, a literal — and each
/// `copyMemory` of them is a call to glibc's `memmove` (some sixty a submit on the loop thread,
/// about ten bytes each). The call and its size dispatch cost more than the copy.
@inlinable @inline(__always)
public func copyBytes(to destination: UnsafeMutableRawPointer, from source: UnsafeRawPointer, count: Int) {
    if count >= 8 {
        if count <= 16 {
            let head = source.loadUnaligned(as: UInt64.self)
            let tail = source.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self)
            destination.storeBytes(of: head, as: UInt64.self)
            destination.storeBytes(of: tail, toByteOffset: count - 8, as: UInt64.self)
        } else if count <= 32 {
            let a = source.loadUnaligned(as: UInt64.self)
            let b = source.loadUnaligned(fromByteOffset: 8, as: UInt64.self)
            let c = source.loadUnaligned(fromByteOffset: count - 16, as: UInt64.self)
            let d = source.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self)
            destination.storeBytes(of: a, as: UInt64.self)
            destination.storeBytes(of: b, toByteOffset: 8, as: UInt64.self)
            destination.storeBytes(of: c, toByteOffset: count - 16, as: UInt64.self)
            destination.storeBytes(of: d, toByteOffset: count - 8, as: UInt64.self)
        } else {
            destination.copyMemory(from: source, byteCount: count)
        }
    } else if count >= 4 {
        let head = source.loadUnaligned(as: UInt32.self)
        let tail = source.loadUnaligned(fromByteOffset: count - 4, as: UInt32.self)
        destination.storeBytes(of: head, as: UInt32.self)
        destination.storeBytes(of: tail, toByteOffset: count - 4, as: UInt32.self)
    } else if count > 0 {
        // 1–3 bytes: first, middle and last (the same byte when count is 1).
        let first = source.load(as: UInt8.self)
        let middle = source.load(fromByteOffset: count >> 1, as: UInt8.self)
        let last = source.load(fromByteOffset: count - 1, as: UInt8.self)
        destination.storeBytes(of: first, as: UInt8.self)
        destination.storeBytes(of: middle, toByteOffset: count >> 1, as: UInt8.self)
        destination.storeBytes(of: last, toByteOffset: count - 1, as: UInt8.self)
    }
}
