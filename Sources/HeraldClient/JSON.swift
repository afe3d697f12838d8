// JSON values, a strict reader of one line and a writer of requests: the client needs nothing else.

/// A JSON value as the server sends it (opaque members such as a submit's `data`, a reply's extras).
public enum HeraldJSON: Sendable, Hashable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([HeraldJSON])
    case object([String: HeraldJSON])

    public subscript(key: String) -> HeraldJSON? {
        if case .object(let members) = self { return members[key] }
        return nil
    }

    public var stringValue: String? { if case .string(let s) = self { return s }; return nil }
    public var boolValue: Bool? { if case .bool(let b) = self { return b }; return nil }
    public var intValue: Int64? {
        switch self {
        case .int(let i): return i
        case .double(let d) where d == d.rounded() && abs(d) < 9.2e18: return Int64(d)
        default: return nil
        }
    }
    public var doubleValue: Double? {
        switch self {
        case .int(let i): return Double(i)
        case .double(let d): return d
        default: return nil
        }
    }
    public var arrayValue: [HeraldJSON]? { if case .array(let a) = self { return a }; return nil }
    public var objectValue: [String: HeraldJSON]? { if case .object(let o) = self { return o }; return nil }

    /// Compact JSON, object keys sorted (the server's canonical form for what it writes).
    public var jsonString: String {
        var writer = JSONWriter()
        writer.value(self)
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    /// Reads one JSON text (the server's lines are strict JSON; this reader is strict too).
    public static func parse(_ bytes: some Collection<UInt8>) throws(HeraldError) -> HeraldJSON {
        let array = Array(bytes)
        return try array.withUnsafeBufferPointer { (buffer) throws(HeraldError) -> HeraldJSON in
            var reader = JSONReader(buffer)
            return try reader.document()
        }
    }

    public static func parse(_ text: String) throws(HeraldError) -> HeraldJSON { try parse(Array(text.utf8)) }
}

extension HeraldJSON: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByFloatLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral {
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(arrayLiteral elements: HeraldJSON...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, HeraldJSON)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
    public init(nilLiteral: ()) { self = .null }
}

/// A strict recursive-descent reader over one line's bytes.
struct JSONReader {
    private let b: UnsafeBufferPointer<UInt8>
    private var i = 0
    private var depth = 0

    init(_ bytes: UnsafeBufferPointer<UInt8>) { b = bytes }

    private func fail(_ what: String) -> HeraldError {
        HeraldError(code: "malformed_reply", title: "The server sent a line that is not JSON",
                    detail: "\(what) at byte \(i) of \(String(decoding: b.prefix(200), as: UTF8.self))")
    }

    mutating func document() throws(HeraldError) -> HeraldJSON {
        let v = try value()
        skipSpace()
        if i != b.count { throw fail("unexpected bytes after the value") }
        return v
    }

    private mutating func skipSpace() {
        while i < b.count, b[i] == 0x20 || b[i] == 0x0A || b[i] == 0x0D || b[i] == 0x09 { i += 1 }
    }

    private mutating func value() throws(HeraldError) -> HeraldJSON {
        skipSpace()
        guard i < b.count else { throw fail("unexpected end") }
        switch b[i] {
        case UInt8(ascii: "{"): return try object()
        case UInt8(ascii: "["): return try array()
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        default: return try number()
        }
    }

    private mutating func literal(_ word: StaticString) throws(HeraldError) {
        let n = word.utf8CodeUnitCount
        guard i + n <= b.count else { throw fail("unexpected end") }
        for k in 0..<n where b[i + k] != word.utf8Start[k] { throw fail("unknown literal") }
        i += n
    }

    private mutating func object() throws(HeraldError) -> HeraldJSON {
        depth += 1
        if depth > 64 { throw fail("nesting too deep") }
        defer { depth -= 1 }
        i += 1
        var members: [String: HeraldJSON] = [:]
        skipSpace()
        if i < b.count, b[i] == UInt8(ascii: "}") { i += 1; return .object(members) }
        while true {
            skipSpace()
            guard i < b.count, b[i] == UInt8(ascii: "\"") else { throw fail("expected a key") }
            let key = try string()
            skipSpace()
            guard i < b.count, b[i] == UInt8(ascii: ":") else { throw fail("expected ':'") }
            i += 1
            members[key] = try value()
            skipSpace()
            guard i < b.count else { throw fail("unexpected end") }
            if b[i] == UInt8(ascii: ",") { i += 1; continue }
            if b[i] == UInt8(ascii: "}") { i += 1; return .object(members) }
            throw fail("expected ',' or '}'")
        }
    }

    private mutating func array() throws(HeraldError) -> HeraldJSON {
        depth += 1
        if depth > 64 { throw fail("nesting too deep") }
        defer { depth -= 1 }
        i += 1
        var elements: [HeraldJSON] = []
        skipSpace()
        if i < b.count, b[i] == UInt8(ascii: "]") { i += 1; return .array(elements) }
        while true {
            elements.append(try value())
            skipSpace()
            guard i < b.count else { throw fail("unexpected end") }
            if b[i] == UInt8(ascii: ",") { i += 1; continue }
            if b[i] == UInt8(ascii: "]") { i += 1; return .array(elements) }
            throw fail("expected ',' or ']'")
        }
    }

    private mutating func string() throws(HeraldError) -> String {
        i += 1
        let start = i
        // The common case: no escapes, taken as one slice.
        while i < b.count, b[i] != UInt8(ascii: "\""), b[i] != UInt8(ascii: "\\") { i += 1 }
        if i < b.count, b[i] == UInt8(ascii: "\"") {
            let s = String(decoding: UnsafeBufferPointer(rebasing: b[start..<i]), as: UTF8.self)
            i += 1
            return s
        }
        var out = Array(b[start..<i])
        while true {
            guard i < b.count else { throw fail("unterminated string") }
            let c = b[i]
            if c == UInt8(ascii: "\"") { i += 1; return String(decoding: out, as: UTF8.self) }
            if c != UInt8(ascii: "\\") { out.append(c); i += 1; continue }
            i += 1
            guard i < b.count else { throw fail("unterminated escape") }
            let e = b[i]
            i += 1
            switch e {
            case UInt8(ascii: "\""): out.append(0x22)
            case UInt8(ascii: "\\"): out.append(0x5C)
            case UInt8(ascii: "/"): out.append(0x2F)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try hex4()
                if (0xD800..<0xDC00).contains(scalar), i + 1 < b.count, b[i] == UInt8(ascii: "\\"), b[i + 1] == UInt8(ascii: "u") {
                    i += 2
                    let low = try hex4()
                    guard (0xDC00..<0xE000).contains(low) else { throw fail("lone surrogate") }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                }
                guard let u = Unicode.Scalar(scalar) else { throw fail("lone surrogate") }
                out.append(contentsOf: Array(String(Character(u)).utf8))
            default: throw fail("unknown escape")
            }
        }
    }

    private mutating func hex4() throws(HeraldError) -> UInt32 {
        guard i + 4 <= b.count else { throw fail("short \\u escape") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let c = b[i]
            i += 1
            v <<= 4
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): v |= UInt32(c - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): v |= UInt32(c - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): v |= UInt32(c - UInt8(ascii: "A") + 10)
            default: throw fail("bad hex digit")
            }
        }
        return v
    }

    private mutating func number() throws(HeraldError) -> HeraldJSON {
        let start = i
        var integral = true
        if i < b.count, b[i] == UInt8(ascii: "-") { i += 1 }
        while i < b.count {
            let c = b[i]
            if c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9") { i += 1; continue }
            if c == UInt8(ascii: ".") || c == UInt8(ascii: "e") || c == UInt8(ascii: "E") || c == UInt8(ascii: "+") || c == UInt8(ascii: "-") {
                integral = false; i += 1; continue
            }
            break
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: b[start..<i]), as: UTF8.self)
        if integral, let v = Int64(text) { return .int(v) }
        guard let d = Double(text), !text.isEmpty else { throw fail("not a value") }
        return .double(d)
    }
}

/// Writes compact JSON into a byte buffer: requests write themselves member by member (`HeraldRequest`), no intermediate values.
public struct JSONWriter: Sendable {
    public internal(set) var bytes: [UInt8] = []
    private var first = true

    public init(capacity: Int = 256) { bytes.reserveCapacity(capacity) }

    mutating func beginObject() { bytes.append(UInt8(ascii: "{")); first = true }
    mutating func endObject() { bytes.append(UInt8(ascii: "}")); first = false }

    mutating func key(_ name: String) {
        if !first { bytes.append(UInt8(ascii: ",")) }
        first = false
        string(name)
        bytes.append(UInt8(ascii: ":"))
    }

    mutating func string(_ s: String) {
        bytes.append(UInt8(ascii: "\""))
        var s = s
        s.withUTF8 { utf8 in
            var runStart = 0
            for (k, c) in utf8.enumerated() where c < 0x20 || c == 0x22 || c == 0x5C {
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<k]))
                runStart = k + 1
                switch c {
                case 0x22: bytes.append(contentsOf: [0x5C, 0x22])
                case 0x5C: bytes.append(contentsOf: [0x5C, 0x5C])
                case 0x0A: bytes.append(contentsOf: [0x5C, UInt8(ascii: "n")])
                case 0x0D: bytes.append(contentsOf: [0x5C, UInt8(ascii: "r")])
                case 0x09: bytes.append(contentsOf: [0x5C, UInt8(ascii: "t")])
                default:
                    let hex: [UInt8] = Array("0123456789abcdef".utf8)
                    bytes.append(contentsOf: [0x5C, UInt8(ascii: "u"), 0x30, 0x30, hex[Int(c >> 4)], hex[Int(c & 0xF)]])
                }
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart...]))
        }
        bytes.append(UInt8(ascii: "\""))
    }

    mutating func raw(_ text: String) { bytes.append(contentsOf: text.utf8) }

    public mutating func value(_ v: HeraldJSON) {
        switch v {
        case .null: raw("null")
        case .bool(let b): raw(b ? "true" : "false")
        case .int(let i): raw(String(i))
        case .double(let d): raw(d.isFinite ? (d == d.rounded() && abs(d) < 1e15 ? String(Int64(d)) + ".0" : String(d)) : "null")
        case .string(let s): string(s)
        case .array(let a):
            bytes.append(UInt8(ascii: "["))
            for (k, e) in a.enumerated() {
                if k > 0 { bytes.append(UInt8(ascii: ",")) }
                value(e)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let o):
            let saved = first
            beginObject()
            for k in o.keys.sorted() {
                key(k)
                value(o[k]!)
            }
            endObject()
            first = saved
        }
    }

    // Members of a request; nil leaves the member out.
    public mutating func member(_ name: String, _ v: String?) { if let v { key(name); string(v) } }
    public mutating func member(_ name: String, _ v: Bool?) { if let v { key(name); raw(v ? "true" : "false") } }
    public mutating func member(_ name: String, _ v: Int?) { if let v { key(name); raw(String(v)) } }
    public mutating func member(_ name: String, _ v: Int64?) { if let v { key(name); raw(String(v)) } }
    public mutating func member(_ name: String, _ v: Double?) { if let v { key(name); value(.double(v)) } }
    public mutating func member(_ name: String, _ v: HeraldJSON?) {
        if let v {
            key(name)
            let saved = first
            value(v)
            first = saved
        }
    }
    public mutating func member(_ name: String, _ v: [String]?) {
        if let v { key(name); value(.array(v.map(HeraldJSON.string))); first = false }
    }
}
