// Typed reading of a request's fields, with errors that name the field, the expected and the actual type.

/// Reads the members of one request object; every failure is a `RequestError` that names
/// the field and says what was expected and what came.
struct RequestFields {
    let op: String
    let members: [String: JSONValue]

    /// The maximum length, in UTF-8 bytes, of ids, app and user names.
    static let maxIdentifierBytes = 256

    /// `required`: the request cannot go without the field, so the detail does not offer to
    /// leave it out (nil: the caller does not know).
    func wrongType(_ field: String, expected: String, got: JSONValue, required: Bool? = nil) -> RequestError {
        let advice = switch required {
        case true?: "Send it as \(expected): \(op) needs it."
        case false?: "Send it as \(expected), or leave it out."
        case nil: "Send it as \(expected), or leave it out if it is optional."
        }
        return RequestError(code: "wrong_type",
                            title: "Field “\(field)” of \(op) is \(article(got.typeName)) \(got.typeName), not \(expected)",
                            detail: "Herald reads “\(field)” as \(expected). \(advice)")
    }

    func missing(_ field: String, _ what: String) -> RequestError {
        RequestError(code: "missing_field", title: "\(op) request has no “\(field)”",
                     detail: "Every \(op) request needs “\(field)” (\(what)). Add it and send the request again.")
    }

    func invalid(_ field: String, _ value: String, allowed: [String]) -> RequestError {
        RequestError(code: "invalid_value", title: "“\(clipped(value))” is not a valid \(field)",
                     detail: "“\(field)” must be one of: \(allowed.joined(separator: ", ")). Use one of those values.")
    }

    func string(_ field: String, required: Bool = false) throws(RequestError) -> String? {
        guard let v = members[field], v != .null else { return nil }
        guard case .string(let s) = v else { throw wrongType(field, expected: "a string", got: v, required: required) }
        return s
    }

    func requiredString(_ field: String, _ what: String) throws(RequestError) -> String {
        guard let s = try string(field, required: true) else { throw missing(field, what) }
        return s
    }

    /// A required identifier: non-empty, at most `maxIdentifierBytes`, in Unicode NFC.
    func identifier(_ field: String, _ what: String) throws(RequestError) -> String {
        let s = try requiredString(field, what)
        try checkIdentifier(field, s)
        return s
    }

    func checkIdentifier(_ field: String, _ s: String) throws(RequestError) {
        if s.isEmpty {
            throw RequestError(code: "invalid_value", title: "“\(field)” of \(op) is empty",
                               detail: "“\(field)” identifies something and cannot be empty. Send a non-empty string.")
        }
        if s.utf8.count > Self.maxIdentifierBytes {
            throw RequestError(code: "identifier_too_long",
                               title: "“\(field)” of \(op) is \(s.utf8.count) bytes long",
                               detail: "Identifiers are at most \(Self.maxIdentifierBytes) bytes of UTF-8. Use a shorter \(field).")
        }
        if let offset = s.firstNonNFCOffset { throw RequestError.notNFC(field, of: op, at: offset) }
    }

    func bool(_ field: String) throws(RequestError) -> Bool? {
        guard let v = members[field], v != .null else { return nil }
        guard case .bool(let b) = v else { throw wrongType(field, expected: "a boolean (true or false)", got: v) }
        return b
    }

    func number(_ field: String) throws(RequestError) -> Double? {
        guard let v = members[field], v != .null else { return nil }
        guard let d = v.doubleValue else { throw wrongType(field, expected: "a number", got: v) }
        return d
    }

    func int(_ field: String) throws(RequestError) -> Int64? {
        guard let v = members[field], v != .null else { return nil }
        guard case .int(let i) = v else { throw wrongType(field, expected: "an integer", got: v) }
        return i
    }

    func array(_ field: String) throws(RequestError) -> [JSONValue]? {
        guard let v = members[field], v != .null else { return nil }
        guard case .array(let a) = v else { throw wrongType(field, expected: "an array", got: v) }
        return a
    }

    func object(_ field: String) throws(RequestError) -> [String: JSONValue]? {
        guard let v = members[field], v != .null else { return nil }
        guard case .object(let o) = v else { throw wrongType(field, expected: "an object", got: v) }
        return o
    }

    func stringArray(_ field: String) throws(RequestError) -> [String]? {
        guard let a = try array(field) else { return nil }
        var out: [String] = []
        out.reserveCapacity(a.count)
        for (i, e) in a.enumerated() {
            guard case .string(let s) = e else { throw wrongType("\(field)[\(i)]", expected: "a string", got: e) }
            out.append(s)
        }
        return out
    }

    func instant(_ field: String) throws(RequestError) -> Instant? {
        guard let s = try string(field) else { return nil }
        guard let t = Instant(rfc3339: s) else {
            throw RequestError(code: "invalid_timestamp", title: "“\(field)” is not an RFC 3339 timestamp: “\(clipped(s))”",
                               detail: "Write times like 2026-03-29T08:30:00Z or 2026-03-29T10:30:00+02:00 (years 0001–9999).")
        }
        return t
    }

    func requiredInstant(_ field: String, _ what: String) throws(RequestError) -> Instant {
        guard let t = try instant(field) else { throw missing(field, what) }
        return t
    }

    /// Field names not in `known`, sorted (for the unknown-field warnings).
    func unknown(_ known: Set<String>) -> [String] {
        members.keys.filter { !known.contains($0) && !RequestFields.envelope.contains($0) }.sorted()
    }

    /// Warnings for the members of a nested object (`path`: "actions[1]", "communication") that
    /// its type does not define: they are not stored, and a typo such as `destuctive` would
    /// otherwise change nothing without a word (docs/engine.md, unknown fields).
    func nestedUnknown(_ known: Set<String>, path: String, of what: String) -> [RequestWarning] {
        members.keys.filter { !known.contains($0) }.sorted().map { u in
            RequestWarning(code: "unknown_field", title: "Field “\(path).\(clipped(u))” is not part of \(what)", detail: RequestWarning.unknownFieldDetail)
        }
    }

    /// Envelope members of every request, never part of an event body.
    static let envelope: Set<String> = ["op", "rid", "token", "route"]
}

func article(_ typeName: String) -> String {
    ["a", "e", "i", "o", "u"].contains(typeName.first.map(String.init) ?? "") ? "an" : "a"
}
