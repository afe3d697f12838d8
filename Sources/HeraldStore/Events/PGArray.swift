// Encodes values as PostgreSQL array literals, so one statement carries a whole batch of rows.

/// Text-format array literals (`{"a","b",NULL}`) for `unnest($1::text[], …)` batch statements.
/// Every element is quoted; `"` and `\` are escaped; nil is SQL NULL.
enum PGArray {
    static func literal<S: Sequence>(_ values: S) -> String where S.Element == String? {
        var out = "{"
        var first = true
        for value in values {
            if !first { out += "," }
            first = false
            guard let value else { out += "NULL"; continue }
            out += "\""
            for scalar in value.unicodeScalars {
                if scalar == "\"" || scalar == "\\" { out += "\\" }
                out.unicodeScalars.append(scalar)
            }
            out += "\""
        }
        out += "}"
        return out
    }

    static func literal<S: Sequence>(_ values: S) -> String where S.Element == String {
        literal(values.lazy.map { Optional($0) })
    }
}
