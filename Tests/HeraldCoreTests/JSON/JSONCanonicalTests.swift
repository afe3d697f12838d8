// The canonical serializer: exact bytes, key order, escaping, and parse/serialize round trips.
import Testing
import HeraldCore
import HeraldTestSupport

@Suite struct JSONCanonicalTests {
    @Test func objectKeysAreSortedByUTF8BytesWithoutWhitespace() throws {
        let v = try JSONValue.parse(#"{ "b": 1, "a": [ true , null ], "B": {"z": 0, "y": -1}, "é": "", "e": 2.5 }"#)
        // 'B' (0x42) < 'a' < 'b' < 'e' < 'é' (0xC3 0xA9): byte order, not locale order.
        #expect(v.canonicalString == #"{"B":{"y":-1,"z":0},"a":[true,null],"b":1,"e":2.5,"é":""}"#)
    }

    /// Integers are plain decimal: every digit count, both signs, and the extremes.
    @Test func integersAreWrittenInDecimalAsSwiftPrintsThem() {
        var values: [Int64] = [0, 1, -1, 9, 10, -10, 99, 100, Int64.max, Int64.min, Int64.min + 1]
        var p: Int64 = 1
        for _ in 0..<18 { p *= 10; values += [p - 1, p, p + 1, -(p - 1), -p, -(p + 1)] }
        var rng = SeededRandom(seed: 0x1D)
        for _ in 0..<2_000 { values.append(Int64(bitPattern: rng.next()) >> Int64(rng.next() % 63)) }
        for v in values { #expect(JSONValue.int(v).canonicalString == String(v), "\(v)") }
    }

    @Test func stringsAreEscapedMinimally() {
        let s = JSONValue.string("q\" b\\ n\n r\r t\t b\u{8} f\u{c} c\u{1} d\u{7f} /é😀\u{2028}")
        #expect(s.canonicalString == #""q\" b\\ n\n r\r t\t b\b f\f c\u0001 d"# + "\u{7f}" + #" /é😀"# + "\u{2028}\"")
        #expect(JSONValue.string("\u{1f}").canonicalString == #""\u001f""#)
    }

    /// The writer skips eight bytes at a time; an escape at any offset of a long string,
    /// beside multi-byte characters, must still be found.
    @Test func stringsAreEscapedMinimallyAtEveryOffset() {
        func reference(_ s: String) -> String {
            var out = "\""
            for u in s.unicodeScalars {
                switch u {
                case "\"": out += "\\\""
                case "\\": out += "\\\\"
                case "\n": out += "\\n"
                case "\r": out += "\\r"
                case "\t": out += "\\t"
                case "\u{8}": out += "\\b"
                case "\u{c}": out += "\\f"
                case _ where u.value < 0x20: out += "\\u00" + (u.value < 0x10 ? "0" : "") + String(u.value, radix: 16)
                default: out.unicodeScalars.append(u)
                }
            }
            return out + "\""
        }
        for special in ["\"", "\\", "\n", "\u{1}", "\u{1f}", "é", "😀", "\u{7f}", " "] {
            for length in 0..<20 {
                for at in 0...length {
                    var chars = Array(repeating: Character("a"), count: length)
                    chars.insert(Character(special), at: at)
                    let s = String(chars)
                    #expect(JSONValue.string(s).canonicalString == reference(s), "\(s.debugDescription)")
                }
            }
        }
    }

    @Test func numbersUseDecimalIntsAndShortestRoundTripDoubles() {
        #expect(JSONValue.int(0).canonicalString == "0")
        #expect(JSONValue.int(-42).canonicalString == "-42")
        #expect(JSONValue.int(.max).canonicalString == "9223372036854775807")
        #expect(JSONValue.int(.min).canonicalString == "-9223372036854775808")
        #expect(JSONValue.double(0.1).canonicalString == "0.1")
        #expect(JSONValue.double(5).canonicalString == "5.0")
        #expect(JSONValue.double(1e16).canonicalString == "1e+16")
        #expect(JSONValue.double(-0.0).canonicalString == "-0.0")
        #expect(JSONValue.double(.leastNonzeroMagnitude).canonicalString == "5e-324")
        // JSON cannot carry non-finite numbers: they are written as null.
        #expect(JSONValue.double(.nan).canonicalString == "null")
        #expect(JSONValue.double(.infinity).canonicalString == "null")
    }

    @Test func writeAppendsToExistingBytes() {
        var out: [UInt8] = Array("x=".utf8)
        JSONValue.array([.int(1), .string("a")]).write(to: &out)
        #expect(String(decoding: out, as: UTF8.self) == #"x=[1,"a"]"#)
        #expect(JSONValue.object([:]).canonicalBytes == Array("{}".utf8))
    }

    @Test func reparsingCanonicalBytesGivesTheSameValueAndBytes() throws {
        let text = #"{"id":"n-1","title":"Hi \"there\"\n","n":[1,-2,3.25,1e300,-0.0],"o":{"k":null,"j":false}}"#
        let v = try JSONValue.parse(text)
        let bytes = v.canonicalBytes
        let again = try JSONValue.parse(bytes)
        #expect(again == v)
        #expect(again.canonicalBytes == bytes)
    }

    @Test func seededRandomValuesRoundTrip() throws {
        let seed: UInt64 = 0x4845_5241_4C44  // "HERALD"
        var rng = SeededRandom(seed: seed)
        for round in 0..<2_000 {
            let v = randomValue(&rng, depth: 0)
            let bytes = v.canonicalBytes
            let parsed: JSONValue
            do {
                parsed = try JSONValue.parse(bytes)
            } catch {
                Issue.record("seed \(seed) round \(round): \(error.message) in \(String(decoding: bytes, as: UTF8.self))")
                continue
            }
            #expect(parsed == v, "seed \(seed) round \(round)")
            #expect(parsed.canonicalBytes == bytes, "seed \(seed) round \(round)")
        }
    }
}

/// Characters chosen to stress escaping and UTF-8: quotes, backslash, every control
/// character but NUL, 2-, 3- and 4-byte sequences, the edges of the BMP and of Unicode.
private let palette: [Unicode.Scalar] = {
    var s: [Unicode.Scalar] = Array("abcXYZ019 \"\\/{}[]:,".unicodeScalars)
    s += (1..<0x20).map { Unicode.Scalar(UInt8($0)) }
    s += ["\u{7f}", "é", "ß", "\u{301}", "€", "日", "\u{2028}", "\u{FEFF}", "\u{FFFD}", "\u{FFFF}", "😀", "\u{10FFFF}"]
    return s
}()

private func randomString(_ rng: inout SeededRandom) -> String {
    let n = Int(rng.next() % 12)
    var s = String.UnicodeScalarView()
    for _ in 0..<n { s.append(palette[Int(rng.next() % UInt64(palette.count))]) }
    return String(s)
}

private func randomValue(_ rng: inout SeededRandom, depth: Int) -> JSONValue {
    let kind = rng.next() % (depth >= 4 ? 5 : 7)
    switch kind {
    case 0: return .null
    case 1: return .bool(rng.next() & 1 == 0)
    case 2:
        let r = rng.next()
        return .int(r & 1 == 0 ? Int64(bitPattern: r) : Int64(bitPattern: r) >> 40)
    case 3:
        while true {
            let d = rng.next() & 1 == 0 ? Double(bitPattern: rng.next()) : Double(Int64(bitPattern: rng.next()) >> 44) / 1000
            if d.isFinite { return .double(d) }
        }
    case 4: return .string(randomString(&rng))
    case 5: return .array((0..<Int(rng.next() % 5)).map { _ in randomValue(&rng, depth: depth + 1) })
    default:
        var members: [String: JSONValue] = [:]
        for _ in 0..<Int(rng.next() % 5) { members[randomString(&rng)] = randomValue(&rng, depth: depth + 1) }
        return .object(members)
    }
}

@Suite struct JSONLiteralTests {
    @Test func literalsBuildTheSameValuesAsTheCases() {
        let v: JSONValue = ["op": "delivery", "cursor": 5, "score": 0.5, "ok": true, "items": [1, "a", [:]], "none": .null]
        #expect(v == .object([
            "op": .string("delivery"), "cursor": .int(5), "score": .double(0.5), "ok": .bool(true),
            "items": .array([.int(1), .string("a"), .object([:])]), "none": .null,
        ]))
        #expect(v.canonicalString == #"{"cursor":5,"items":[1,"a",{}],"none":null,"ok":true,"op":"delivery","score":0.5}"#)
    }
}
