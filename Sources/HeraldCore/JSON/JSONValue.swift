// The JSON value type of the wire protocol and stored event bodies, with typed accessors.

/// One JSON value. Numbers keep the distinction the wire needs: `.int` for integers that
/// fit in 64 bits (ids, counts, sequence numbers, milliseconds), `.double` for everything
/// else. Objects are unordered; their canonical encoding sorts keys by UTF-8 bytes.
///
/// Equality is Swift's: strings compare by Unicode canonical equivalence, so two values
/// can be `==` while their canonical bytes differ (precomposed vs decomposed accents).
/// Parsing the same bytes always gives the same value and the same canonical bytes.
public enum JSONValue: Hashable, Sendable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])
}

extension JSONValue {
    /// The member named `key`: nil unless this is an object that has that key.
    public subscript(key: String) -> JSONValue? {
        if case .object(let members) = self { return members[key] }
        return nil
    }

    /// The text of a `.string`, else nil.
    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    /// The value of an `.int`, else nil (a `.double` is not silently truncated).
    public var intValue: Int64? {
        if case .int(let v) = self { return v }
        return nil
    }

    /// The value of a `.double`, or of an `.int` converted (possibly rounded beyond 2^53).
    public var doubleValue: Double? {
        switch self {
        case .double(let d): return d
        case .int(let v): return Double(v)
        default: return nil
        }
    }

    /// The value of a `.bool`, else nil.
    public var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }

    /// The elements of an `.array`, else nil.
    public var arrayValue: [JSONValue]? {
        if case .array(let a) = self { return a }
        return nil
    }

    /// The members of an `.object`, else nil.
    public var objectValue: [String: JSONValue]? {
        if case .object(let o) = self { return o }
        return nil
    }

    /// The JSON type's name for error texts: "null", "boolean", "integer", "number",
    /// "string", "array" or "object".
    public var typeName: String {
        switch self {
        case .null: return "null"
        case .bool: return "boolean"
        case .int: return "integer"
        case .double: return "number"
        case .string: return "string"
        case .array: return "array"
        case .object: return "object"
        }
    }
}
