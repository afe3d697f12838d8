// Standard base64 (RFC 4648, padded): a sealed value's text in a JSON body.

/// Encodes and decodes base64 without Foundation (the core links none).
public enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    private static let values: [UInt8] = {
        var v = [UInt8](repeating: 0xFF, count: 256)
        for (i, c) in alphabet.enumerated() { v[Int(c)] = UInt8(i) }
        return v
    }()

    public static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        encode(bytes, into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends the base64 of `bytes` to `out`.
    public static func encode(_ bytes: [UInt8], into out: inout [UInt8]) {
        bytes.withUnsafeBytes { encode($0, into: &out) }
    }

    /// Appends the base64 of `bytes` to `out`, written in place (sealing encodes every stored
    /// body's content: a bounds-checked append per character cost more than the cipher).
    public static func encode(_ bytes: UnsafeRawBufferPointer, into out: inout [UInt8]) {
        let length = (bytes.count + 2) / 3 * 4
        let start = out.count
        out.append(contentsOf: repeatElement(0, count: length))
        let digits: StaticString = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
        let a = digits.utf8Start
        out.withUnsafeMutableBufferPointer { buffer in
            let o = buffer.baseAddress! + start
            var i = 0, j = 0
            while i + 3 <= bytes.count {
                let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
                o[j] = a[Int(n >> 18 & 63)]; o[j + 1] = a[Int(n >> 12 & 63)]
                o[j + 2] = a[Int(n >> 6 & 63)]; o[j + 3] = a[Int(n & 63)]
                i += 3; j += 4
            }
            let rest = bytes.count - i
            if rest > 0 {
                let n = UInt32(bytes[i]) << 16 | (rest == 2 ? UInt32(bytes[i + 1]) << 8 : 0)
                o[j] = a[Int(n >> 18 & 63)]; o[j + 1] = a[Int(n >> 12 & 63)]
                o[j + 2] = rest == 2 ? a[Int(n >> 6 & 63)] : UInt8(ascii: "=")
                o[j + 3] = UInt8(ascii: "=")
            }
        }
    }

    /// The bytes `text` encodes; nil when it is not padded base64.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        let chars = Array(text.utf8)
        guard chars.count % 4 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(chars.count / 4 * 3)
        var i = 0
        while i < chars.count {
            var n: UInt32 = 0
            var pad = 0
            for j in 0..<4 {
                let c = chars[i + j]
                if c == UInt8(ascii: "=") && i + 4 == chars.count && j >= 2 { pad += 1; n <<= 6; continue }
                guard pad == 0 else { return nil }
                let v = values[Int(c)]
                guard v != 0xFF else { return nil }
                n = n << 6 | UInt32(v)
            }
            out.append(UInt8(n >> 16 & 255))
            if pad < 2 { out.append(UInt8(n >> 8 & 255)) }
            if pad < 1 { out.append(UInt8(n & 255)) }
            i += 4
        }
        return out
    }
}
