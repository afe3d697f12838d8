// Reading `herald retain`'s archive back: each segment file checked against what `archive_segments` recorded.
import Foundation
import HeraldCore

/// The archive directory of one database, read in position order for `herald export --archive`.
public struct ArchiveSegments: Sendable {
    public var directory: URL
    public init(directory: URL) { self.directory = directory }

    /// Every archived line of `kind` ("events" or "deliveries") of partition 0, in position order,
    /// and the last position they hold. Each file must be recorded, have the recorded rows and
    /// SHA-256, and follow the one before without a gap.
    func lines(_ connection: PGConnection, kind: String) throws(StoreError) -> (lines: [String], last: Int64) {
        let r = try connection.execute("""
            SELECT first_position, last_position, rows, sha256, file FROM archive_segments
            WHERE partition = 0 AND kind = $1 ORDER BY first_position
            """, [kind])
        var lines: [String] = []
        var last: Int64 = 0
        for i in 0..<r.rowCount {
            let first = r.int64(i, 0) ?? 0, end = r.int64(i, 1) ?? 0, file = r.string(i, 4) ?? ""
            guard first == last + 1 else {
                throw .configuration("the archive's \(kind) jump from \(last) to \(first): archive_segments lacks a segment")
            }
            let url = directory.appendingPathComponent(file)
            guard let data = FileManager.default.contents(atPath: url.path) else {
                throw .configuration("archive segment \(url.path) cannot be read: is --archive the directory herald retain wrote?")
            }
            let bytes = [UInt8](data)
            guard SHA256.hex(bytes) == r.string(i, 3) else {
                throw .configuration("archive segment \(url.path) does not match the SHA-256 recorded when it was written: it was changed or cut")
            }
            let text = String(decoding: bytes, as: UTF8.self).split(separator: "\n").map(String.init)
            guard Int64(text.count) == r.int64(i, 2), Int64(text.count) == end - first + 1 else {
                throw .configuration("archive segment \(url.path) holds \(text.count) lines where \(end - first + 1) were recorded")
            }
            lines += text
            last = end
        }
        return (lines, last)
    }
}
