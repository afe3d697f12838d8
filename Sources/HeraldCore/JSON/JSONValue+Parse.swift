// Strict RFC 8259 parsing straight from UTF-8 bytes, with errors that say what is wrong and where.
#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif

/// Why some bytes are not acceptable JSON. `message` is a sentence meant for the person
/// who sent the bytes: what is wrong, at which byte, and what to write instead.
public struct JSONParseError: Error, Hashable, Sendable, CustomStringConvertible {
    /// Zero-based byte offset in the input where the problem was found.
    public var offset: Int
    /// What is wrong and where, e.g. `Duplicate object key "id" at byte 14: each key may
    /// appear only once in an object.`
    public var message: String

    /// An error at `offset` with a ready-made message.
    public init(offset: Int, message: String) {
        self.offset = offset
        self.message = message
    }

    public var description: String { message }
}

extension JSONValue {
    /// Parses exactly one JSON value (with optional surrounding whitespace) from UTF-8 bytes.
    ///
    /// Strict RFC 8259, plus Herald's own rules: NUL is rejected everywhere, raw or as
    /// `\u0000` (libpq text parameters would silently truncate at it); duplicate keys are
    /// an error; containers may nest at most `maxDepth` levels. Integers without fraction
    /// or exponent that fit in Int64 become `.int`, other numbers `.double`; numbers too
    /// large for a Double (`1e999`) are rejected.
    ///
    /// With `interner`, strings without escapes (keys and values) come from it: a reader of many
    /// stored bodies then holds one copy of each repeated app id, and dictionaries keyed by them
    /// compare keys by identity.
    public static func parse(_ bytes: UnsafeRawBufferPointer, maxDepth: Int = 32,
                             interner: StringInterner? = nil) throws(JSONParseError) -> JSONValue {
        guard let base = bytes.baseAddress, bytes.count > 0 else {
            throw JSONParseError(offset: 0, message: "The input is empty at byte 0: expected one JSON value, such as an object {…}.")
        }
        // Why assumingMemoryBound: the bytes come from [UInt8], String's UTF-8 storage or a
        // C buffer of char, all bound to a one-byte integer type; they are only read, and
        // only for the duration of this call (the pointer never escapes the parser).
        var parser = JSONParser(base: base.assumingMemoryBound(to: UInt8.self), count: bytes.count, maxDepth: maxDepth)
        parser.interner = interner
        return try parser.parseDocument()
    }

    /// Visits the members of a canonical object (plain ASCII keys in increasing order) without
    /// building it; false when `bytes` are anything else — then whatever was visited must be
    /// discarded and `parse` used.
    ///
    /// With `plainString`, a member whose value is a string without escapes is handed over as
    /// the bytes between its quotes (valid UTF-8, no control character: exactly the string's
    /// UTF-8 and exactly what `writeString` would write back) instead of as a `.string`.
    static func visitCanonicalObject(_ bytes: UnsafeRawBufferPointer, maxDepth: Int = 32,
                                     _ visit: (UnsafeRawBufferPointer, JSONValue) -> Void,
                                     plainString: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> Void) -> Bool {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return false }
        var parser = JSONParser(base: base.assumingMemoryBound(to: UInt8.self), count: bytes.count, maxDepth: maxDepth)
        return (try? parser.visitCanonicalObject(visit, wantsPlain: true, plainString: plainString)) ?? false
    }

    /// `visitCanonicalObject` handing every member over as a `JSONValue`.
    static func visitCanonicalObject(_ bytes: UnsafeRawBufferPointer, maxDepth: Int = 32,
                                     _ visit: (UnsafeRawBufferPointer, JSONValue) -> Void) -> Bool {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return false }
        var parser = JSONParser(base: base.assumingMemoryBound(to: UInt8.self), count: bytes.count, maxDepth: maxDepth)
        return (try? parser.visitCanonicalObject(visit, wantsPlain: false, plainString: { _, _ in })) ?? false
    }

    /// Parses exactly one JSON value from UTF-8 bytes. See `parse(_:maxDepth:)` on raw buffers.
    public static func parse(_ bytes: [UInt8], maxDepth: Int = 32) throws(JSONParseError) -> JSONValue {
        let result = bytes.withUnsafeBytes { buffer in
            Result { () throws(JSONParseError) -> JSONValue in try parse(buffer, maxDepth: maxDepth) }
        }
        return try result.get()
    }

    /// Parses exactly one JSON value from the UTF-8 form of `text`.
    public static func parse(_ text: String, maxDepth: Int = 32) throws(JSONParseError) -> JSONValue {
        var text = text
        let result = text.withUTF8 { buffer in
            Result { () throws(JSONParseError) -> JSONValue in try parse(UnsafeRawBufferPointer(buffer), maxDepth: maxDepth) }
        }
        return try result.get()
    }
}

// ASCII bytes the grammar names.
private let quote: UInt8 = 0x22, backslash: UInt8 = 0x5C, slash: UInt8 = 0x2F
private let comma: UInt8 = 0x2C, colon: UInt8 = 0x3A, minus: UInt8 = 0x2D, plus: UInt8 = 0x2B
private let dot: UInt8 = 0x2E, zero: UInt8 = 0x30, nine: UInt8 = 0x39
private let openBrace: UInt8 = 0x7B, closeBrace: UInt8 = 0x7D
private let openBracket: UInt8 = 0x5B, closeBracket: UInt8 = 0x5D

/// A single-use cursor over the input. Works on a raw pointer so that the hot loops do no
/// bounds-checked array access; every read is guarded by `i < end` first. Internal so that
/// `SubmitLine` can read a submit's members with the same string, number and literal rules.
struct JSONParser {
    let p: UnsafePointer<UInt8>
    let end: Int
    let maxDepth: Int
    var i = 0
    var depth = 0
    /// Reused buffer for strings that contain escapes (the common case needs none).
    var scratch: [UInt8] = []
    /// Members of the objects being parsed, innermost last; see `parseObject`.
    var members: [Member] = []
    /// Shares repeated strings (see `JSONValue.parse(_:maxDepth:interner:)`).
    var interner: StringInterner?

    struct Member {
        var key: String
        var value: JSONValue
        var offset: Int
    }

    init(base: UnsafePointer<UInt8>, count: Int, maxDepth: Int) {
        self.p = base
        self.end = count
        self.maxDepth = maxDepth
    }

    // MARK: Document

    mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        if end >= 3, p[0] == 0xEF, p[1] == 0xBB, p[2] == 0xBF {
            throw fail(0, "A UTF-8 byte order mark (EF BB BF)", "remove it; JSON text starts directly with its value")
        }
        skipWhitespace()
        guard i < end else {
            throw fail(i, "The input holds only whitespace", "expected one JSON value, such as an object {…}")
        }
        let value = try parseValue()
        skipWhitespace()
        if i < end {
            throw fail(i, "Unexpected \(describe(i)) after the end of the JSON value",
                       "a document holds exactly one value; remove the extra text or wrap the values in an array")
        }
        return value
    }

    @inline(__always)
    mutating func skipWhitespace() {
        while i < end {
            let c = p[i]
            guard c == 0x20 || c == 0x0A || c == 0x0D || c == 0x09 else { return }
            i += 1
        }
    }

    // MARK: Values

    mutating func parseValue() throws(JSONParseError) -> JSONValue {
        guard i < end else { throw endOfInput("a value") }
        switch p[i] {
        case quote: return .string(try parseString())
        case openBrace: return try parseObject()
        case openBracket: return try parseArray()
        case minus, zero...nine: return try parseNumber()
        case 0x74: try expectLiteral("true"); return .bool(true)  // t
        case 0x66: try expectLiteral("false"); return .bool(false)  // f
        case 0x6E: try expectLiteral("null"); return .null  // n
        default: throw unexpectedWhereValueExpected()
        }
    }

    /// Parses a document that is one object whose keys are plain ASCII (no escapes) and strictly
    /// increasing — the canonical form the store keeps — handing each member to `visit` as it
    /// goes: the key as its bytes, without building a String or the object's dictionary.
    /// Returns false for any other input, valid or not; the caller then discards what it was
    /// visited with and takes the general path (`parse`).
    mutating func visitCanonicalObject(_ visit: (UnsafeRawBufferPointer, JSONValue) -> Void, wantsPlain: Bool,
                                       plainString: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> Void) throws(JSONParseError) -> Bool {
        // No whitespace anywhere: the canonical form has none (any other input takes `parse`).
        guard i < end, p[i] == openBrace else { return false }
        try enterContainer(at: i)
        i += 1
        if i < end, p[i] == closeBrace {
            i += 1
        } else {
            var previous: UnsafeRawBufferPointer?
            while true {
                guard i < end, p[i] == quote else { return false }
                let keyStart = i + 1
                var k = keyStart
                while k + 8 <= end {
                    let flags = attentionFlags(UInt64(littleEndian: UnsafeRawPointer(p + k).loadUnaligned(as: UInt64.self)))
                    guard flags == 0 else { k += flags.trailingZeroBitCount >> 3; break }
                    k += 8
                }
                while k < end, p[k] != quote {
                    guard p[k] >= 0x20, p[k] < 0x80, p[k] != backslash else { return false }
                    k += 1
                }
                guard k < end else { return false }
                let key = UnsafeRawBufferPointer(start: p + keyStart, count: k - keyStart)
                if let previous, !precedes(previous, key) { return false }
                previous = key
                i = k + 1
                guard i < end, p[i] == colon else { return false }
                i += 1
                if wantsPlain, i < end, p[i] == quote, let raw = try scanPlainString() {
                    plainString(key, raw)
                } else {
                    visit(key, try parseValue())
                }
                guard i < end else { return false }
                if p[i] == comma { i += 1; continue }
                if p[i] == closeBrace { i += 1; break }
                return false
            }
        }
        depth -= 1
        return i == end
    }

    /// Byte order of two keys (memcmp, then length).
    private func precedes(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        let n = min(a.count, b.count)
        let c = n == 0 ? 0 : memcmp(a.baseAddress!, b.baseAddress!, n)
        return c < 0 || (c == 0 && a.count < b.count)
    }

    mutating func parseObject() throws(JSONParseError) -> JSONValue {
        let open = i
        try enterContainer(at: open)
        i += 1
        skipWhitespace()
        if i < end, p[i] == closeBrace {
            i += 1
            depth -= 1
            return .object([:])
        }
        // Members are collected on a shared stack first so the dictionary is built once at
        // its final size (growing it member by member rehashed every key several times).
        let base = members.count
        while true {
            guard i < end else { throw endOfInput("an object key in double quotes (the object opened at byte \(open))") }
            guard p[i] == quote else {
                if p[i] == closeBrace {
                    throw fail(i, "A trailing comma before '}'", "remove the comma after the last member")
                }
                throw fail(i, "Unexpected \(describe(i)) where an object key was expected",
                           "keys are strings in double quotes, e.g. {\"id\": 1}")
            }
            let keyStart = i
            let key = try parseString()
            skipWhitespace()
            guard i < end else { throw endOfInput("':' after the object key \(quoted(key))") }
            guard p[i] == colon else {
                throw fail(i, "Unexpected \(describe(i)) after the object key \(quoted(key))", "expected ':' and then the member's value")
            }
            i += 1
            skipWhitespace()
            let value = try parseValue()
            members.append(Member(key: key, value: value, offset: keyStart))
            skipWhitespace()
            guard i < end else { throw endOfInput("',' or '}' (the object opened at byte \(open))") }
            let c = p[i]
            if c == comma {
                i += 1
                skipWhitespace()
                continue
            }
            if c == closeBrace {
                i += 1
                break
            }
            throw fail(i, "Unexpected \(describe(i)) after an object member", "expected ',' before the next member or '}' to close the object")
        }
        var dictionary = [String: JSONValue](minimumCapacity: members.count - base)
        for k in base..<members.count {
            let m = members[k]
            if dictionary.updateValue(m.value, forKey: m.key) != nil {
                throw fail(m.offset, "Duplicate object key \(quoted(m.key))",
                           "each key may appear only once in an object (keys equal under Unicode canonical equivalence count as the same)")
            }
        }
        members.removeSubrange(base...)
        depth -= 1
        return .object(dictionary)
    }

    mutating func parseArray() throws(JSONParseError) -> JSONValue {
        let open = i
        try enterContainer(at: open)
        i += 1
        var elements: [JSONValue] = []
        skipWhitespace()
        if i < end, p[i] == closeBracket {
            i += 1
            depth -= 1
            return .array(elements)
        }
        while true {
            guard i < end else { throw endOfInput("a value (the array opened at byte \(open))") }
            if p[i] == closeBracket, !elements.isEmpty {
                throw fail(i, "A trailing comma before ']'", "remove the comma after the last element")
            }
            elements.append(try parseValue())
            skipWhitespace()
            guard i < end else { throw endOfInput("',' or ']' (the array opened at byte \(open))") }
            let c = p[i]
            if c == comma {
                i += 1
                skipWhitespace()
                continue
            }
            if c == closeBracket {
                i += 1
                break
            }
            throw fail(i, "Unexpected \(describe(i)) after an array element", "expected ',' before the next element or ']' to close the array")
        }
        depth -= 1
        return .array(elements)
    }

    @inline(__always)
    mutating func enterContainer(at offset: Int) throws(JSONParseError) {
        depth += 1
        if depth > maxDepth {
            throw fail(offset, "Nesting deeper than \(maxDepth) levels",
                       "objects and arrays may be nested at most \(maxDepth) deep; flatten the structure")
        }
    }

    mutating func expectLiteral(_ word: StaticString) throws(JSONParseError) {
        let start = i
        let n = word.utf8CodeUnitCount
        let w = word.utf8Start
        var k = 0
        while k < n {
            guard i + k < end, p[i + k] == w[k] else {
                throw fail(start, "An invalid literal", "did you mean \(word)? Literals are lowercase true, false and null")
            }
            k += 1
        }
        i += n
    }

    // MARK: Numbers

    mutating func parseNumber() throws(JSONParseError) -> JSONValue {
        let start = i
        var negative = false
        if p[i] == minus {
            negative = true
            i += 1
            guard i < end else { throw endOfInput("a digit after '-'") }
            if p[i] == 0x49 || p[i] == 0x4E {  // I N
                throw fail(start, "-Infinity or NaN is not a JSON number", "send a finite number, or null")
            }
            guard isDigit(p[i]) else {
                throw fail(i, "Unexpected \(describe(i)) after '-'", "a minus sign must be followed by a digit")
            }
        }
        let intStart = i
        if p[i] == zero {
            i += 1
            if i < end, isDigit(p[i]) {
                throw fail(start, "A number with a leading zero", "write 7 or 0.7, not 07; JSON numbers never start with 0 unless they are 0 or 0.x")
            }
        } else {
            while i < end, isDigit(p[i]) { i += 1 }
        }
        let intEnd = i
        var integral = true
        if i < end, p[i] == dot {
            integral = false
            i += 1
            guard i < end, isDigit(p[i]) else {
                throw fail(i, "A decimal point without digits after it", "add digits after the point, e.g. 1.0")
            }
            while i < end, isDigit(p[i]) { i += 1 }
        }
        if i < end, p[i] | 0x20 == 0x65 {  // e E
            integral = false
            i += 1
            if i < end, p[i] == plus || p[i] == minus { i += 1 }
            guard i < end, isDigit(p[i]) else {
                throw fail(i, "An exponent without digits", "write 1e5 or 1e-5; 'e' must be followed by digits")
            }
            while i < end, isDigit(p[i]) { i += 1 }
        }
        if integral, intEnd - intStart <= 19 {
            // At most 19 digits: fits in UInt64 without overflow checks.
            var magnitude: UInt64 = 0
            for k in intStart..<intEnd { magnitude = magnitude &* 10 &+ UInt64(p[k] &- zero) }
            if negative {
                if magnitude <= UInt64(Int64.max) + 1 { return .int(Int64(bitPattern: 0 &- magnitude)) }
            } else if magnitude <= UInt64(Int64.max) {
                return .int(Int64(magnitude))
            }
        }
        let text = String(decoding: UnsafeBufferPointer(start: p + start, count: i - start), as: UTF8.self)
        guard let d = Double(text), d.isFinite else {
            throw fail(start, "The number \(text.count > 40 ? String(text.prefix(40)) + "…" : text) is out of range",
                       "numbers must fit in a 64-bit floating-point value (magnitude below about 1.8e308)")
        }
        return .double(d)
    }

    @inline(__always)
    func isDigit(_ c: UInt8) -> Bool { c &- zero < 10 }

    // MARK: Strings

    /// Parses the string starting at the opening quote at `i`.
    mutating func parseString() throws(JSONParseError) -> String {
        let open = i
        i += 1
        let start = i
        if try scanUnescaped(open: open) {
            let raw = UnsafeRawBufferPointer(start: p + start, count: i - 1 - start)
            return interner?.string(raw) ?? String(decoding: raw, as: UTF8.self)
        }
        scratch.removeAll(keepingCapacity: true)
        scratch.append(contentsOf: UnsafeBufferPointer(start: p + start, count: i - start))
        return try parseStringWithEscapes(open: open)
    }

    /// At an opening quote: the bytes of a string without escapes, up to its closing quote
    /// (which is consumed), validated as `parseString` validates them. nil, with nothing
    /// consumed, when the string has an escape.
    mutating func scanPlainString() throws(JSONParseError) -> UnsafeRawBufferPointer? {
        let open = i
        i += 1
        let start = i
        guard try scanUnescaped(open: open) else { i = open; return nil }
        return UnsafeRawBufferPointer(start: p + start, count: i - 1 - start)
    }

    /// Inside a string: validates bytes up to its closing quote (true, the quote consumed) or
    /// its first backslash (false, `i` at the backslash). Control characters, invalid UTF-8 and
    /// a missing closing quote are errors.
    mutating func scanUnescaped(open: Int) throws(JSONParseError) -> Bool {
        while true {
            // Eight plain ASCII bytes at a time (no quote, backslash, control or non-ASCII
            // byte); the byte loop below handles everything else.
            while i + 8 <= end {
                let flags = attentionFlags(UInt64(littleEndian: UnsafeRawPointer(p + i).loadUnaligned(as: UInt64.self)))
                // Straight to the first flagged byte (the lowest flag is exact: the tests' borrows
                // only ever flag bytes above a true match).
                guard flags == 0 else { i += flags.trailingZeroBitCount >> 3; break }
                i += 8
            }
            guard i < end else { break }
            let c = p[i]
            if c == quote { i += 1; return true }
            if c == backslash { return false }
            if c < 0x20 { throw controlCharacter(at: i) }
            if c < 0x80 { i += 1 } else { try skipUTF8Sequence() }
        }
        throw fail(open, "A string that is never closed", "add the closing double quote")
    }

    /// True when any byte of `x` is '"', '\\', below 0x20 or at least 0x80.
    @inline(__always)
    func needsAttention(_ x: UInt64) -> Bool { attentionFlags(x) != 0 }

    /// The high bit of each byte of `x` (loaded little-endian) that is '"', '\\', below 0x20 or at
    /// least 0x80 — exact for the lowest such byte.
    @inline(__always)
    func attentionFlags(_ x: UInt64) -> UInt64 { ByteScan.quoteBackslashOrControl(x) | ByteScan.nonASCII(x) }

    /// Continues a string after its first backslash, copying the decoded bytes into `scratch`.
    mutating func parseStringWithEscapes(open: Int) throws(JSONParseError) -> String {
        while i < end {
            let c = p[i]
            if c == quote {
                i += 1
                return String(decoding: scratch, as: UTF8.self)
            }
            if c == backslash {
                try parseEscape()
            } else if c < 0x20 {
                throw controlCharacter(at: i)
            } else if c < 0x80 {
                scratch.append(c)
                i += 1
            } else {
                let s = i
                try skipUTF8Sequence()
                scratch.append(contentsOf: UnsafeBufferPointer(start: p + s, count: i - s))
            }
        }
        throw fail(open, "A string that is never closed", "add the closing double quote")
    }

    mutating func parseEscape() throws(JSONParseError) {
        let at = i
        guard i + 1 < end else { throw endOfInput("an escape character after '\\'") }
        let e = p[i + 1]
        i += 2
        switch e {
        case quote: scratch.append(quote)
        case backslash: scratch.append(backslash)
        case slash: scratch.append(slash)
        case 0x62: scratch.append(0x08)  // b
        case 0x66: scratch.append(0x0C)  // f
        case 0x6E: scratch.append(0x0A)  // n
        case 0x72: scratch.append(0x0D)  // r
        case 0x74: scratch.append(0x09)  // t
        case 0x75:  // u
            let unit = try hex4(escapeAt: at)
            var scalar: UInt32
            switch unit {
            case 0:
                throw fail(at, "A NUL character (\\u0000) in a string",
                           "NUL is not allowed anywhere in Herald requests because PostgreSQL text cannot store it; remove it")
            case 0xD800...0xDBFF:
                guard i + 1 < end, p[i] == backslash, p[i + 1] == 0x75 else {
                    throw fail(at, "A lone high surrogate \\u\(hex(unit)) in a string",
                               "it must be followed by a low surrogate escape \\uDC00–\\uDFFF; send the character as UTF-8 or as a valid pair")
                }
                let lowAt = i
                i += 2
                let low = try hex4(escapeAt: lowAt)
                guard (0xDC00...0xDFFF).contains(low) else {
                    throw fail(lowAt, "A high surrogate \\u\(hex(unit)) followed by \\u\(hex(low)), which is not a low surrogate",
                               "a surrogate pair is \\uD800–\\uDBFF followed by \\uDC00–\\uDFFF")
                }
                scalar = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
            case 0xDC00...0xDFFF:
                throw fail(at, "A lone low surrogate \\u\(hex(unit)) in a string",
                           "a low surrogate may only follow a high surrogate \\uD800–\\uDBFF")
            default:
                scalar = unit
            }
            appendUTF8(scalar)
        default:
            throw fail(at, "An invalid escape \\\(describeEscape(e)) in a string",
                       "valid escapes are \\\" \\\\ \\/ \\b \\f \\n \\r \\t and \\uXXXX")
        }
    }

    /// Reads the four hex digits at `i` (after `\u`) and advances past them.
    mutating func hex4(escapeAt at: Int) throws(JSONParseError) -> UInt32 {
        guard i + 4 <= end else { throw endOfInput("four hex digits after \\u") }
        var v: UInt32 = 0
        for k in 0..<4 {
            let c = p[i + k]
            let d: UInt32
            switch c {
            case zero...nine: d = UInt32(c - zero)
            case 0x61...0x66: d = UInt32(c - 0x61 + 10)
            case 0x41...0x46: d = UInt32(c - 0x41 + 10)
            default:
                throw fail(at, "An invalid \\u escape", "\\u must be followed by exactly four hex digits, e.g. \\u00e9")
            }
            v = v << 4 | d
        }
        i += 4
        return v
    }

    mutating func appendUTF8(_ s: UInt32) {
        if s < 0x80 {
            scratch.append(UInt8(s))
        } else if s < 0x800 {
            scratch.append(UInt8(0xC0 | s >> 6))
            scratch.append(UInt8(0x80 | s & 0x3F))
        } else if s < 0x10000 {
            scratch.append(UInt8(0xE0 | s >> 12))
            scratch.append(UInt8(0x80 | s >> 6 & 0x3F))
            scratch.append(UInt8(0x80 | s & 0x3F))
        } else {
            scratch.append(UInt8(0xF0 | s >> 18))
            scratch.append(UInt8(0x80 | s >> 12 & 0x3F))
            scratch.append(UInt8(0x80 | s >> 6 & 0x3F))
            scratch.append(UInt8(0x80 | s & 0x3F))
        }
    }

    /// Validates one multi-byte UTF-8 sequence at `i` (lead byte >= 0x80) and skips it.
    /// Rejects overlong forms, encoded surrogates and code points above U+10FFFF.
    @inline(__always)
    mutating func skipUTF8Sequence() throws(JSONParseError) {
        let b0 = p[i]
        var n: Int
        var lo: UInt8 = 0x80, hi: UInt8 = 0xBF
        switch b0 {
        case 0xC2...0xDF: n = 1
        case 0xE0: n = 2; lo = 0xA0
        case 0xED: n = 2; hi = 0x9F
        case 0xE1...0xEF: n = 2
        case 0xF0: n = 3; lo = 0x90
        case 0xF4: n = 3; hi = 0x8F
        case 0xF1...0xF3: n = 3
        default: throw invalidUTF8(at: i)
        }
        guard i + n < end else { throw invalidUTF8(at: i) }
        let b1 = p[i + 1]
        guard b1 >= lo, b1 <= hi else { throw invalidUTF8(at: i) }
        var k = 2
        while k <= n {
            guard p[i + k] & 0xC0 == 0x80 else { throw invalidUTF8(at: i) }
            k += 1
        }
        i += n + 1
    }

    // MARK: Errors

    func fail(_ offset: Int, _ what: String, _ hint: String) -> JSONParseError {
        JSONParseError(offset: offset, message: "\(what) at byte \(offset): \(hint).")
    }

    func endOfInput(_ expected: String) -> JSONParseError {
        fail(end, "The input ends too early", "expected \(expected)")
    }

    func invalidUTF8(at offset: Int) -> JSONParseError {
        fail(offset, "Invalid UTF-8 (byte 0x\(hex(UInt32(p[offset]), width: 2)))",
             "JSON text must be well-formed UTF-8; re-encode the text as UTF-8")
    }

    func controlCharacter(at offset: Int) -> JSONParseError {
        let c = p[offset]
        if c == 0 {
            return fail(offset, "A NUL byte in a string",
                        "NUL is not allowed anywhere in Herald requests because PostgreSQL text cannot store it; remove it")
        }
        let escape: String
        switch c {
        case 0x0A: escape = "\\n"
        case 0x0D: escape = "\\r"
        case 0x09: escape = "\\t"
        case 0x08: escape = "\\b"
        case 0x0C: escape = "\\f"
        default: escape = "\\u00\(hex(UInt32(c), width: 2).lowercased())"
        }
        return fail(offset, "An unescaped control character U+00\(hex(UInt32(c), width: 2)) in a string",
                    "control characters must be escaped; write \(escape)")
    }

    func unexpectedWhereValueExpected() -> JSONParseError {
        let c = p[i]
        switch c {
        case 0:
            return fail(i, "A NUL byte", "NUL is not allowed anywhere in Herald requests because PostgreSQL text cannot store it; remove it")
        case 0x4E, 0x49:  // N I
            return fail(i, "NaN or Infinity is not a JSON number", "send a finite number, or null")
        case plus:
            return fail(i, "A number starting with '+'", "write 5, not +5")
        case dot:
            return fail(i, "A number starting with '.'", "write 0.5, not .5")
        case 0x27:
            return fail(i, "A single-quoted string", "JSON strings use double quotes")
        case closeBracket, closeBrace:
            return fail(i, "Unexpected \(describe(i)) where a value was expected", "a value is missing; check for a trailing comma or a missing value")
        default:
            return fail(i, "Unexpected \(describe(i)) where a value was expected",
                        "a value is an object, array, string in double quotes, number, true, false or null")
        }
    }

    /// A short human description of the byte at `offset` for error texts.
    func describe(_ offset: Int) -> String {
        let c = p[offset]
        switch c {
        case 0: return "NUL byte"
        case 0x01..<0x20, 0x7F: return "control character U+00\(hex(UInt32(c), width: 2))"
        case 0x20..<0x7F: return "'\(Character(Unicode.Scalar(c)))'"
        default: return "byte 0x\(hex(UInt32(c), width: 2))"
        }
    }

    func describeEscape(_ c: UInt8) -> String {
        (0x21..<0x7F).contains(c) ? String(Character(Unicode.Scalar(c))) : "(byte 0x\(hex(UInt32(c), width: 2)))"
    }

    /// A key or string shown in an error, escaped and shortened so the message stays one line.
    func quoted(_ s: String) -> String {
        JSONValue.string(clipped(s, to: 40)).canonicalString
    }
}

/// Uppercase hex, zero-padded to `width` digits.
private func hex(_ v: UInt32, width: Int = 4) -> String {
    let s = String(v, radix: 16, uppercase: true)
    return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
}
