// Reading a string's UTF-8 bytes without copying the string first.

extension String {
    /// The string's UTF-8 bytes, in place for a native string; only a bridged one is copied.
    /// `var s = s; s.withUTF8 { … }` retains and releases the copy through the generic value
    /// witnesses, and `writeString` alone calls this a dozen times a submit.
    @inlinable @inline(__always) public func withUTF8Bytes<R>(_ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        if let r = utf8.withContiguousStorageIfAvailable(body) { return r }
        var bridged = self
        return bridged.withUTF8(body)
    }
}
