// Text out of the fixed-size C buffers the runtime and the store have C functions fill.

extension String {
    /// The bytes of `buffer` before its first NUL (all of them when it has none: never read past
    /// its end), decoded as UTF-8 with invalid sequences repaired. For `inet_ntop`, `getcwd` and
    /// the TLS shim's peer names; `String(cString: [CChar])` is deprecated for the same reason.
    public init(cBuffer buffer: [CChar]) {
        self.init(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
