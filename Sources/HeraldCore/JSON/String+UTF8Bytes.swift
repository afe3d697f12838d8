// Reading a string's UTF-8 bytes without copying the string first.

extension String {
    /// The string's UTF-8 bytes, in place for a native string; only a bridged one is copied.
    /// `var s = s; s.withUTF8 { … }` retained and released the copy through the generic value
    /// witnesses (~200 instructions a call, 13 calls a submit in `writeString` alone:
    /// docs/service-profile.md, session 17).
    @inlinable @inline(__always) public func withUTF8Bytes<R>(_ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        if let r = utf8.withContiguousStorageIfAvailable(body) { return r }
        var bridged = self
        return bridged.withUTF8(body)
    }
}
