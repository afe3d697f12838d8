// Reading `herald retain`'s archive back: each segment file checked against what `archive_segments` recorded.
import Foundation
import HeraldCore

/// The archive directory of one database, read in position order for `herald export --archive`.
public struct ArchiveSegments: Sendable {
    public var directory: URL
    public init(directory: URL) { self.directory = directory }

    /// Writes every archived line of `kind` ("events" or "deliveries") of partition 0, in position
    /// order, and returns how many and the last position they hold. Each file must be recorded,
    /// have the recorded rows and SHA-256, and follow the one before without a gap; a file is
    /// checked whole before any of its lines is written. Content archived sealed is opened with
    /// `keys` as the hot rows' is (the erased form once a user's key is gone).
    func write(_ connection: PGConnection, kind: String, keys: KeyRing, _ write: (String) -> Void) throws(StoreError) -> (lines: Int, last: Int64) {
        let r = try connection.execute("""
            SELECT first_position, last_position, rows, sha256, file FROM archive_segments
            WHERE partition = 0 AND kind = $1 ORDER BY first_position
            """, [kind])
        var lines = 0
        var last: Int64 = 0
        for i in 0..<r.rowCount {
            let first = r.int64(i, 0) ?? 0, end = r.int64(i, 1) ?? 0, file = r.string(i, 4) ?? ""
            guard first == last + 1 else {
                throw .configuration("the archive's \(kind) jump from \(last) to \(first): archive_segments lacks a segment")
            }
            let url = directory.appendingPathComponent(file)
            let checked: (rows: Int, sha256: String)
            do { checked = try ArchiveFileReader.read(url) } catch {
                throw .configuration("archive segment \(url.path) cannot be read (\(error)): is --archive the directory herald retain wrote?")
            }
            guard checked.sha256 == r.string(i, 3) else {
                throw .configuration("archive segment \(url.path) does not match the SHA-256 recorded when it was written: it was changed or cut")
            }
            guard Int64(checked.rows) == r.int64(i, 2), Int64(checked.rows) == end - first + 1 else {
                throw .configuration("archive segment \(url.path) holds \(checked.rows) lines where \(end - first + 1) were recorded")
            }
            do { _ = try ArchiveFileReader.read(url, splitting: true) { write(Self.opened($0, kind: kind, keys: keys)) } } catch {
                throw .configuration("archive segment \(url.path) cannot be read (\(error))")
            }
            lines += checked.rows
            last = end
        }
        return (lines, last)
    }

    /// An archived line with its sealed body opened (`LogTransfer`'s export line for the row).
    static func opened(_ line: String, kind: String, keys: KeyRing) -> String {
        guard line.contains("sealed"), case .object(var outer)? = try? JSONValue.parse(Array(line.utf8)) else { return line }
        let member = kind == "events" ? "event" : "delivery"
        guard case .object(var row)? = outer[member], let body = row["body"]?.stringValue else { return line }
        let stored = Array(body.utf8)
        let readable = keys.readable(stored, user: row["user"]?.stringValue)
        guard readable != stored else { return line }
        row["body"] = .string(String(decoding: readable, as: UTF8.self))
        row["sealed"] = true
        outer[member] = .object(row)
        return JSONValue.object(outer).canonicalString
    }
}
