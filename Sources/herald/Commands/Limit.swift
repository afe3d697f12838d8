// Parsing of `--at` / `--until` values: a seq number or an RFC 3339 engine time.
import ArgumentParser
import HeraldCommandLine
import HeraldCore
import HeraldStore

extension Replayer.Limit {
    /// nil text means the whole log.
    static func parse(_ text: String?) throws -> Replayer.Limit {
        guard let text else { return .everything }
        if let seq = Int64(text) {
            guard seq >= 0 else { throw ValidationError("“\(text)” is not a seq: seqs start at 1 (0 is before the first event)") }
            return .seq(seq)
        }
        if let t = Instant(rfc3339: text) { return .time(t) }
        throw ValidationError("“\(text)” is neither a seq number nor an RFC 3339 time such as 2026-03-28T08:00:00Z")
    }
}

/// Prints JSON: canonical on one line, or indented for people.
func printJSON(_ value: JSONValue, pretty: Bool) {
    print(pretty ? value.indented() : value.canonicalString)
}

extension JSONValue {
    /// Two-space indented rendering for terminals (keys sorted, like the canonical form).
    func indented(_ depth: Int = 0) -> String {
        let pad = String(repeating: "  ", count: depth + 1), end = String(repeating: "  ", count: depth)
        switch self {
        case .array(let a) where !a.isEmpty:
            return "[\n" + a.map { pad + $0.indented(depth + 1) }.joined(separator: ",\n") + "\n" + end + "]"
        case .object(let o) where !o.isEmpty:
            return "{\n" + o.keys.sorted().map { pad + JSONValue.string($0).canonicalString + ": " + o[$0]!.indented(depth + 1) }
                .joined(separator: ",\n") + "\n" + end + "}"
        default:
            return canonicalString
        }
    }
}
