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
    public func write(to out: inout ByteSink) {
        switch self {
        case .null:
            out.append("null")
        case .bool(let b):
            out.append(b ? "true" : "false")
        case .int(let v):
            writeInt(v, to: &out)
        case .double(let d):
            writeDouble(d, to: &out)
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

    /// Appends the canonical encoding (see `write(to:)` on a sink) to an array.
    public func write(to out: inout [UInt8]) {
        out.append(contentsOf: withSink { write(to: &$0) })
    }

    /// The canonical encoding (see `write(to:)`) as bytes.
    public var canonicalBytes: [UInt8] {
        withSink(capacity: 64) { write(to: &$0) }
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

/// Appends `v` in decimal (the canonical form of `.int`).
///
/// Digits are written from the last, in place, dividing by the constant 10 only (a multiply):
/// dividing by a varying power of ten would take two hardware divisions a digit, and a submit
/// writes four integers.
func writeInt(_ v: Int64, to out: inout ByteSink) {
    var rest = v.magnitude
    var digits = 1
    var t = rest
    while t >= 10 { t /= 10; digits += 1 }
    let sign = v < 0 ? 1 : 0
    out.appendInPlace(maximum: 20) { p in
        if sign == 1 { p[0] = 0x2D }
        var i = sign + digits
        repeat {
            i -= 1
            p[i] = UInt8(truncatingIfNeeded: rest % 10) &+ 0x30
            rest /= 10
        } while rest != 0
        return sign + digits
    }
}

/// Appends the canonical form of `.double(d)`: Swift's shortest round-trip `description`
/// (`null` when not finite). Values with at most three decimals below a million — relevance
/// scores, which every summary item carries twice — are written without `description` (a
/// `String` allocated a call): when the thousandths `m` nearest `d * 1000` give back
/// `d` (`m / 1000 == d`), `m` with its trailing zeros dropped is the shortest form, and the only
/// one of that length (two different numbers of thousandths below a million are farther apart
/// than a double's spacing there, and a shorter decimal that gives `d` back has the same
/// thousandths). Identical bytes (`DoubleCanonicalTests`).
func writeDouble(_ d: Double, to out: inout ByteSink) {
    guard d.isFinite else { out.append("null"); return }
    if d > -1e6 && d < 1e6 && !(d == 0 && d.sign == .minus) {
        let a = d.magnitude
        let m = (a * 1000).rounded()
        if m / 1000 == a {
            let thousandths = UInt64(m)
            let whole = thousandths / 1000, fraction = Int(thousandths % 1000)
            if d < 0 { out.append(0x2D) }
            if whole < 10 { out.append(UInt8(truncatingIfNeeded: whole) &+ 0x30) } else { writeInt(Int64(whole), to: &out) }
            out.appendInPlace(maximum: 4) { p in
                p[0] = 0x2E
                let d1 = fraction / 100, d2 = fraction / 10 % 10, d3 = fraction % 10
                p[1] = UInt8(truncatingIfNeeded: d1) &+ 0x30
                if d3 != 0 {
                    p[2] = UInt8(truncatingIfNeeded: d2) &+ 0x30
                    p[3] = UInt8(truncatingIfNeeded: d3) &+ 0x30
                    return 4
                }
                if d2 != 0 { p[2] = UInt8(truncatingIfNeeded: d2) &+ 0x30; return 3 }
                return 2
            }
            return
        }
    }
    var text = d.description
    text.withUTF8 { out.append(UnsafeRawBufferPointer($0)) }
}

private let hexDigits: StaticString = "0123456789abcdef"

/// Appends `s` as a canonical JSON string (quotes included), without a `JSONValue` around it.
func writeString(_ s: String, to out: inout ByteSink) {
    s.withUTF8Bytes { bytes in
        // Most strings need no escape: check, then copy them with their quotes in one piece.
        if !needsEscape(bytes) {
            out.appendInPlace(maximum: bytes.count + 2) { p in
                p[0] = 0x22
                if let source = bytes.baseAddress { copyBytes(to: p + 1, from: source, count: bytes.count) }
                p[bytes.count + 1] = 0x22
                return bytes.count + 2
            }
            return
        }
        out.append(0x22)
        writeEscaped(bytes, to: &out)
        out.append(0x22)
    }
}

/// Whether some byte of `bytes` is '"', '\\' or a control character, eight bytes at a time:
/// the last word overlaps the one before it, and a string shorter than eight bytes is tested as
/// one word padded with spaces. (A byte at a time, the tail of a short id — most strings a
/// delivery carries — would take about half of `writeString`'s time.)
@inline(__always)
private func needsEscape(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
    let n = bytes.count
    guard let base = UnsafeRawPointer(bytes.baseAddress), n > 0 else { return false }
    if n >= 8 {
        var k = 0
        while k + 8 < n {
            if ByteScan.quoteBackslashOrControl(base.loadUnaligned(fromByteOffset: k, as: UInt64.self)) != 0 { return true }
            k += 8
        }
        return ByteScan.quoteBackslashOrControl(base.loadUnaligned(fromByteOffset: n - 8, as: UInt64.self)) != 0
    }
    // 1–7 bytes in one word (bytes read twice where the pieces overlap; spaces need no escape).
    let word: UInt64
    if n >= 4 {
        word = UInt64(base.loadUnaligned(as: UInt32.self))
            | UInt64(base.loadUnaligned(fromByteOffset: n - 4, as: UInt32.self)) << 32
    } else {
        word = 0x2020_2020_2000_0000
            | UInt64(base.load(as: UInt8.self))
            | UInt64(base.load(fromByteOffset: n >> 1, as: UInt8.self)) << 8
            | UInt64(base.load(fromByteOffset: n - 1, as: UInt8.self)) << 16
    }
    return ByteScan.quoteBackslashOrControl(word) != 0
}

/// The body of a JSON string with its escapes (quotes not included).
private func writeEscaped(_ bytes: UnsafeBufferPointer<UInt8>, to out: inout ByteSink) {
    var runStart = 0
    var k = 0
    let n = bytes.count
    let base = UnsafeRawPointer(bytes.baseAddress)
    while k < n {
        // Eight bytes at a time while none needs escaping (most strings never do).
        if let base {
            while k + 8 <= n, ByteScan.quoteBackslashOrControl(base.loadUnaligned(fromByteOffset: k, as: UInt64.self)) == 0 { k += 8 }
            guard k < n else { break }
        }
        let c = bytes[k]
        if c >= 0x20, c != 0x22, c != 0x5C {
            k += 1
            continue
        }
        if runStart < k { out.append(UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: bytes[runStart..<k]))) }
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
    if runStart < n { out.append(UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: bytes[runStart..<n]))) }
}
