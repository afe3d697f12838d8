// The strict JSON parser: what it accepts, what it rejects, and the message it gives.
import Testing
import HeraldCore

/// Parses `text` expecting failure; returns the error (or records an issue).
private func parseError(_ text: String, maxDepth: Int = 32, sourceLocation: SourceLocation = #_sourceLocation) -> JSONParseError? {
    do {
        let v = try JSONValue.parse(text, maxDepth: maxDepth)
        Issue.record("expected \(text.debugDescription) to be rejected, got \(v)", sourceLocation: sourceLocation)
        return nil
    } catch {
        return error
    }
}

private func parseError(bytes: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) -> JSONParseError? {
    do {
        let v = try JSONValue.parse(bytes)
        Issue.record("expected \(bytes) to be rejected, got \(v)", sourceLocation: sourceLocation)
        return nil
    } catch {
        return error
    }
}

@Suite struct JSONParseTests {
    @Test func parsesEveryKindOfValue() throws {
        let v = try JSONValue.parse(#" {"a": [1, -2, 3.5, true, false, null, "x"], "b": {}, "c": []} "#)
        #expect(v == .object([
            "a": .array([.int(1), .int(-2), .double(3.5), .bool(true), .bool(false), .null, .string("x")]),
            "b": .object([:]),
            "c": .array([]),
        ]))
        #expect(try JSONValue.parse("0") == .int(0))
        #expect(try JSONValue.parse("\"\"") == .string(""))
        #expect(try JSONValue.parse(" \t\r\n null \n") == .null)
    }

    @Test func threeEntryPointsAgree() throws {
        let text = #"{"id":"n-1","n":[1,2.5]}"#
        let fromString = try JSONValue.parse(text)
        let fromArray = try JSONValue.parse(Array(text.utf8))
        let bytes = Array(text.utf8)
        let fromRaw = try bytes.withUnsafeBytes { buffer throws(JSONParseError) in try JSONValue.parse(buffer) }
        #expect(fromString == fromArray)
        #expect(fromString == fromRaw)
    }

    @Test func integersThatFitInt64AreIntOthersDouble() throws {
        #expect(try JSONValue.parse("9223372036854775807") == .int(.max))
        #expect(try JSONValue.parse("-9223372036854775808") == .int(.min))
        #expect(try JSONValue.parse("9223372036854775808") == .double(9223372036854775808.0))
        #expect(try JSONValue.parse("-9223372036854775809") == .double(-9223372036854775809.0))
        #expect(try JSONValue.parse("123456789012345678901234") == .double(123456789012345678901234.0))
        #expect(try JSONValue.parse("-0") == .int(0))
        #expect(try JSONValue.parse("1.0") == .double(1.0))
        #expect(try JSONValue.parse("1e2") == .double(100))
        #expect(try JSONValue.parse("1E+2") == .double(100))
        #expect(try JSONValue.parse("-2.5e-3") == .double(-0.0025))
        #expect(try JSONValue.parse("0.1") == .double(0.1))
        #expect(try JSONValue.parse("1e-400") == .double(0))  // underflow rounds to zero: in range
    }

    @Test func stringEscapesDecode() throws {
        let v = try JSONValue.parse(#""a\"b\\c\/d\b\f\n\r\t\u00e9\u20AC\ud83d\ude00""#)
        #expect(v == .string("a\"b\\c/d\u{8}\u{c}\n\r\té€😀"))
        #expect(try JSONValue.parse("\"héllo — 日本 😀\"") == .string("héllo — 日本 😀"))
    }

    @Test func accessorsAndTypeNames() throws {
        let v = try JSONValue.parse(#"{"s":"x","i":3,"d":2.5,"b":true,"a":[],"o":{},"n":null}"#)
        #expect(v["s"]?.stringValue == "x")
        #expect(v["i"]?.intValue == 3)
        #expect(v["i"]?.doubleValue == 3.0)
        #expect(v["d"]?.doubleValue == 2.5)
        #expect(v["d"]?.intValue == nil)
        #expect(v["b"]?.boolValue == true)
        #expect(v["a"]?.arrayValue == [])
        #expect(v["o"]?.objectValue == [:])
        #expect(v["missing"] == nil)
        #expect(v["s"]?["s"] == nil)
        let names = ["s", "i", "d", "b", "a", "o", "n"].map { v[$0]!.typeName }
        #expect(names == ["string", "integer", "number", "boolean", "array", "object", "null"])
    }

    // MARK: Rejections, each with its message

    @Test func rejectsEmptyAndWhitespaceOnly() {
        #expect(parseError("")?.message == "The input is empty at byte 0: expected one JSON value, such as an object {…}.")
        #expect(parseError("  ")?.offset == 2)
    }

    @Test func rejectsTrailingContentAfterTheValue() {
        let e = parseError(#"{"a":1} {"b":2}"#)
        #expect(e?.offset == 8)
        #expect(e?.message == "Unexpected '{' after the end of the JSON value at byte 8: a document holds exactly one value; remove the extra text or wrap the values in an array.")
    }

    @Test func rejectsInvalidUTF8() {
        // Lone continuation byte, overlong '/', encoded surrogate, above U+10FFFF, truncated.
        for bad: [UInt8] in [[0x22, 0x80, 0x22], [0x22, 0xC0, 0xAF, 0x22], [0x22, 0xED, 0xA0, 0x80, 0x22],
                             [0x22, 0xF4, 0x90, 0x80, 0x80, 0x22], [0x22, 0xE2, 0x82]] {
            let e = parseError(bytes: bad)
            #expect(e?.offset == 1)
            #expect(e?.message.hasPrefix("Invalid UTF-8 (byte 0x") == true)
        }
        #expect(parseError(bytes: [0x22, 0xFF, 0x22])?.message
                == "Invalid UTF-8 (byte 0xFF) at byte 1: JSON text must be well-formed UTF-8; re-encode the text as UTF-8.")
    }

    @Test func rejectsUnescapedControlCharacters() {
        let e = parseError("\"a\nb\"")
        #expect(e?.offset == 2)
        #expect(e?.message == "An unescaped control character U+000A in a string at byte 2: control characters must be escaped; write \\n.")
        #expect(parseError("\"\u{1F}\"")?.message.contains("write \\u001f") == true)
    }

    @Test func rejectsNULRawOrEscapedAnywhere() {
        let raw = parseError(bytes: [0x22, 0x61, 0x00, 0x22])
        #expect(raw?.offset == 2)
        #expect(raw?.message == "A NUL byte in a string at byte 2: NUL is not allowed anywhere in Herald requests because PostgreSQL text cannot store it; remove it.")
        let escaped = parseError(#"{"app":"app-a\u0000x"}"#)
        #expect(escaped?.offset == 13)
        #expect(escaped?.message == "A NUL character (\\u0000) in a string at byte 13: NUL is not allowed anywhere in Herald requests because PostgreSQL text cannot store it; remove it.")
        #expect(parseError(bytes: [0x5B, 0x00, 0x5D])?.message.hasPrefix("A NUL byte at byte 1") == true)
        #expect(parseError(bytes: [0x31, 0x00])?.message.hasPrefix("Unexpected NUL byte after the end") == true)
        #expect(parseError(#"{"a\u0000":1}"#)?.offset == 3)
    }

    @Test func rejectsLoneAndInvalidSurrogateEscapes() {
        #expect(parseError(#""\ud83d""#)?.message == "A lone high surrogate \\uD83D in a string at byte 1: it must be followed by a low surrogate escape \\uDC00–\\uDFFF; send the character as UTF-8 or as a valid pair.")
        #expect(parseError(#""\ud83dx""#)?.offset == 1)
        #expect(parseError(#""\ude00""#)?.message == "A lone low surrogate \\uDE00 in a string at byte 1: a low surrogate may only follow a high surrogate \\uD800–\\uDBFF.")
        let pair = parseError(#""\ud83d\u0041""#)
        #expect(pair?.offset == 7)
        #expect(pair?.message.hasPrefix("A high surrogate \\uD83D followed by \\u0041, which is not a low surrogate") == true)
        #expect(parseError(#""\u12G4""#)?.message == "An invalid \\u escape at byte 1: \\u must be followed by exactly four hex digits, e.g. \\u00e9.")
        #expect(parseError(#""\x""#)?.message == "An invalid escape \\x in a string at byte 1: valid escapes are \\\" \\\\ \\/ \\b \\f \\n \\r \\t and \\uXXXX.")
    }

    @Test func rejectsDuplicateObjectKeys() {
        let e = parseError(#"{"id":1,"id":2}"#)
        #expect(e?.offset == 8)
        #expect(e?.message == "Duplicate object key \"id\" at byte 8: each key may appear only once in an object (keys equal under Unicode canonical equivalence count as the same).")
        // The same key spelled with an escape is still the same key.
        #expect(parseError(#"{"id":1,"\u0069d":2}"#)?.offset == 8)
        // Duplicates in nested objects too.
        #expect(parseError(#"{"a":{"b":1,"b":1}}"#)?.offset == 12)
    }

    @Test func rejectsNestingDeeperThanMaxDepth() throws {
        let ok = String(repeating: "[", count: 32) + String(repeating: "]", count: 32)
        #expect(try JSONValue.parse(ok) != .null)
        let deep = String(repeating: "[", count: 33) + String(repeating: "]", count: 33)
        let e = parseError(deep)
        #expect(e?.offset == 32)
        #expect(e?.message == "Nesting deeper than 32 levels at byte 32: objects and arrays may be nested at most 32 deep; flatten the structure.")
        #expect(parseError(#"{"a":{"b":1}}"#, maxDepth: 1)?.offset == 5)
        // Deep input far beyond the limit fails fast instead of overflowing the stack.
        #expect(parseError(String(repeating: "[", count: 100_000))?.offset == 32)
    }

    @Test func rejectsLeadingZeros() {
        #expect(parseError("01")?.message == "A number with a leading zero at byte 0: write 7 or 0.7, not 07; JSON numbers never start with 0 unless they are 0 or 0.x.")
        #expect(parseError("[-00]")?.offset == 1)
    }

    @Test func rejectsNaNAndInfinity() {
        #expect(parseError("NaN")?.message == "NaN or Infinity is not a JSON number at byte 0: send a finite number, or null.")
        #expect(parseError("[Infinity]")?.offset == 1)
        #expect(parseError("-Infinity")?.message == "-Infinity or NaN is not a JSON number at byte 0: send a finite number, or null.")
    }

    @Test func rejectsOutOfRangeNumbers() {
        #expect(parseError("1e999")?.message == "The number 1e999 is out of range at byte 0: numbers must fit in a 64-bit floating-point value (magnitude below about 1.8e308).")
        #expect(parseError("[-1.5e400]")?.offset == 1)
    }

    @Test func rejectsMalformedNumbers() {
        #expect(parseError("+1")?.message == "A number starting with '+' at byte 0: write 5, not +5.")
        #expect(parseError(".5")?.message == "A number starting with '.' at byte 0: write 0.5, not .5.")
        #expect(parseError("1.")?.message == "A decimal point without digits after it at byte 2: add digits after the point, e.g. 1.0.")
        #expect(parseError("1e")?.offset == 2)
        #expect(parseError("1e+")?.offset == 3)
        #expect(parseError("-")?.message == "The input ends too early at byte 1: expected a digit after '-'.")
        #expect(parseError("-a")?.offset == 1)
    }

    @Test func rejectsTrailingCommas() {
        #expect(parseError("[1,2,]")?.message == "A trailing comma before ']' at byte 5: remove the comma after the last element.")
        #expect(parseError(#"{"a":1,}"#)?.message == "A trailing comma before '}' at byte 7: remove the comma after the last member.")
        #expect(parseError("[,]")?.offset == 1)
        #expect(parseError("[1,,2]")?.offset == 3)
    }

    @Test func rejectsOtherSyntaxErrorsWithPlaceAndHint() {
        #expect(parseError("[1 2]")?.message == "Unexpected '2' after an array element at byte 3: expected ',' before the next element or ']' to close the array.")
        #expect(parseError(#"{"a" 1}"#)?.message == "Unexpected '1' after the object key \"a\" at byte 5: expected ':' and then the member's value.")
        #expect(parseError("{a:1}")?.message == "Unexpected 'a' where an object key was expected at byte 1: keys are strings in double quotes, e.g. {\"id\": 1}.")
        #expect(parseError("'x'")?.message == "A single-quoted string at byte 0: JSON strings use double quotes.")
        #expect(parseError("True")?.offset == 0)
        #expect(parseError("nul")?.message == "An invalid literal at byte 0: did you mean null? Literals are lowercase true, false and null.")
        #expect(parseError("\"abc")?.message == "A string that is never closed at byte 0: add the closing double quote.")
        #expect(parseError("[1")?.message == "The input ends too early at byte 2: expected ',' or ']' (the array opened at byte 0).")
        #expect(parseError(bytes: [0xEF, 0xBB, 0xBF, 0x31])?.message.hasPrefix("A UTF-8 byte order mark") == true)
    }
}
