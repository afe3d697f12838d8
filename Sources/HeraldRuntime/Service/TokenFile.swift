// Reading the tokens file (`--tokens`), at start-up and on SIGHUP.
import Glibc
import HeraldCore

/// The tokens file on disk. Errors name the file and the flag, and say what to fix.
public enum TokenFile {
    /// Reads and parses the file; a plain `token` entry is accepted (see `TokenTable.plainTokenEntries`).
    public static func load(_ path: String) throws(ServiceError) -> TokenTable {
        guard let file = fopen(path, "rb") else {
            throw .configuration("The tokens file \(path) (--tokens) cannot be read: \(String(cString: strerror(errno))). "
                + "Check the path and its permissions, or leave out --tokens to run in dev mode.")
        }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = fread(&chunk, 1, chunk.count, file)
            if n > 0 { bytes += chunk[..<n] }
            if n < chunk.count { break }
        }
        if ferror(file) != 0 {
            throw .configuration("The tokens file \(path) (--tokens) could not be read to the end: \(String(cString: strerror(errno))).")
        }
        do {
            return try TokenTable.parse(JSONValue.parse(bytes))
        } catch let error as RequestError {
            throw .configuration("The tokens file \(path) (--tokens) is not valid: \(error.detail)")
        } catch {
            let reason = "\(error)"  // the parser's sentence ends with its own full stop
            throw .configuration("The tokens file \(path) (--tokens) is not valid JSON: \(reason.hasSuffix(".") ? String(reason.dropLast()) : reason). "
                + "It must be {\"tokens\":[{\"name\":…,\"sha256\":…,\"roles\":[…]}]}.")
        }
    }

    /// The start-up warning for two or more consumer entries without a `consumers` list, or nil:
    /// each may ack another's cursor past what it processed, or take over its stream.
    public static func sharedConsumerNamesWarning(_ table: TokenTable, path: String) -> String? {
        let open = table.consumerEntriesWithoutNames
        guard open.count > 1 else { return nil }
        return "warning: in the tokens file \(path), \(open.count) entries with the consumer role list no \"consumers\" "
            + "(\(open.joined(separator: ", "))): each may subscribe and ack as any consumer name no entry lists, so one can move another's "
            + "acknowledged cursor or take over its stream; give each entry \"consumers\": [its names] (docs/security.md)"
    }

    /// The start-up warning for entries that keep a token in clear, or nil.
    public static func plainTokenWarning(_ table: TokenTable, path: String) -> String? {
        guard !table.plainTokenEntries.isEmpty else { return nil }
        return "warning: the tokens file \(path) holds \(table.plainTokenEntries.count) token(s) in clear "
            + "(\(table.plainTokenEntries.joined(separator: ", "))); replace each \"token\" with \"sha256\" "
            + "printed by `herald token hash`, so a copy of the file does not give access"
    }
}
