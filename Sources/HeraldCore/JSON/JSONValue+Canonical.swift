// The canonical JSON encoding: one byte sequence per value, for byte-identical replay.

extension JSONValue {
    /// Appends the canonical encoding of this value to `out`:
    /// - no whitespace; object keys sorted by their UTF-8 bytes;
    /// - strings escaped minimally: `\"` `\\` `\n` `\r` `\t` `\b` `\f`, other control
    ///   characters as `\u00xx` (lowercase hex), everything else raw UTF-8 (`/` included);
    /// - `.int` in decimal; `.double` in Swift's shortest round-trip form (`description`,
    ///   e.g. `0.1`, `5.0`, `1e+16`), so it parses back to the same `.double`;
    /// - a non-finite `.double` (never produced by the parser) is written as `null`,
    ///   since JSON cannot represent it.
    /// The serializer writes any string; a string containing U+0000 is encoded as
    /// `\u0000`, which `parse` rejects by policy.
    public func write(to out: inout [UInt8]) {
        switch self {
        case .null:
            appendASCII("null", to: &out)
        case .bool(let b):
            appendASCII(b ? "true" : "false", to: &out)
        case .int(let v):
            writeInt(v, to: &out)
        case .double(let d):
            if d.isFinite {
                var text = d.description
                text.withUTF8 { out.append(contentsOf: $0) }
            } else {
                appendASCII("null", to: &out)
            }
        case .string(let s):
            writeString(s, to: &out)
        case .array(let elements):
            out.append(0x5B)
            var first = true
            for e in elements {
                if !first { out.append(0x2C) }
                first = false
                e.write(to: &out)
            }
            out.append(0x5D)
        case .object(let members):
            out.append(0x7B)
            var first = true
            for key in members.keys.sorted(by: utf8Precedes) {
                if !first { out.append(0x2C) }
                first = false
                writeString(key, to: &out)
                out.append(0x3A)
                members[key].unsafelyUnwrapped.write(to: &out)
            }
            out.append(0x7D)
        }
    }

    /// The canonical encoding (see `write(to:)`) as bytes.
    public var canonicalBytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64)
        write(to: &out)
        return out
    }

    /// The canonical encoding (see `write(to:)`) as text.
    public var canonicalString: String {
        String(decoding: canonicalBytes, as: UTF8.self)
    }
}

/// Orders strings by their UTF-8 bytes (not by Swift's Unicode-aware `<`), so the key
/// order is a fixed function of the bytes on every platform.
private func utf8Precedes(_ a: String, _ b: String) -> Bool {
    a.utf8.lexicographicallyPrecedes(b.utf8)
}

@inline(__always)
private func appendASCII(_ s: StaticString, to out: inout [UInt8]) {
    out.append(contentsOf: UnsafeBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount))
}

/// Appends `v` in decimal (the canonical form of `.int`).
func writeInt(_ v: Int64, to out: inout [UInt8]) {
    if v < 0 { out.append(0x2D) }
    var rest = v.magnitude
    var divisor: UInt64 = 1
    while divisor <= rest / 10 { divisor &*= 10 }
    while true {
        out.append(UInt8(truncatingIfNeeded: rest / divisor) &+ 0x30)
        rest %= divisor
        if divisor == 1 { return }
        divisor /= 10
    }
}

private let hexDigits: StaticString = "0123456789abcdef"

/// Appends `s` as a canonical JSON string (quotes included), without a `JSONValue` around it.
func writeString(_ s: String, to out: inout [UInt8]) {
    out.append(0x22)
    var s = s
    s.withUTF8 { bytes in
        var runStart = 0
        var k = 0
        let n = bytes.count
        while k < n {
            let c = bytes[k]
            if c >= 0x20, c != 0x22, c != 0x5C {
                k += 1
                continue
            }
            if runStart < k { out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<k])) }
            out.append(0x5C)
            switch c {
            case 0x22: out.append(0x22)
            case 0x5C: out.append(0x5C)
            case 0x0A: out.append(0x6E)  // n
            case 0x0D: out.append(0x72)  // r
            case 0x09: out.append(0x74)  // t
            case 0x08: out.append(0x62)  // b
            case 0x0C: out.append(0x66)  // f
            default:
                out.append(0x75)  // u
                out.append(0x30)
                out.append(0x30)
                out.append(hexDigits.utf8Start[Int(c >> 4)])
                out.append(hexDigits.utf8Start[Int(c & 0xF)])
            }
            k += 1
            runStart = k
        }
        if runStart < n { out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<n])) }
    }
    out.append(0x22)
}
