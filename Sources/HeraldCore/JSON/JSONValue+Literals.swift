// Literal syntax for building JSON values in code: ["op": "delivery", "cursor": 5, "items": []].

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral {
    /// A `.string`.
    public init(stringLiteral value: String) { self = .string(value) }
    /// An `.int`.
    public init(integerLiteral value: Int64) { self = .int(value) }
    /// A `.double`.
    public init(floatLiteral value: Double) { self = .double(value) }
    /// A `.bool`.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    /// An `.array`.
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    /// An `.object`. A key written twice in one literal is a programming error and traps.
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(uniqueKeysWithValues: elements))
    }
}
