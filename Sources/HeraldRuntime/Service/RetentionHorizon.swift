// `cursor_expired`: a consumer whose position is behind the retention horizon is told so, never skipped (SPEC §14).
import HeraldCore

extension HeraldService {
    /// The earliest cursor of this partition a consumer can resume from: deliveries at or below it
    /// may have been archived and dropped by `herald retain` (0 when nothing was).
    static let retentionCursorSQL = "SELECT cursor FROM retention_horizons WHERE partition = $1"

    /// The failure line for a stream at `position`, behind `earliest`: the error names the
    /// partition and the position to resume from.
    static func cursorExpiredLine(rid: JSONValue?, partition: Int, position: Int64, earliest: Int64) -> [UInt8] {
        var error = RequestError(code: "cursor_expired",
            title: "Cursor \(position) of partition \(partition) is behind the retention horizon",
            detail: "Deliveries up to \(earliest) were archived and dropped from the database (docs/retention.md). Subscribe from \(earliest) "
                + "(or \"earliest\") to resume with what is kept; what lies between is in the archive.").json
        if case .object(var fields) = error {
            fields["partition"] = .int(Int64(partition))
            fields["earliest"] = .int(earliest)
            error = .object(fields)
        }
        var object: [String: JSONValue] = ["ok": false, "error": error]
        if let rid { object["rid"] = rid }
        return WireReply.line(.object(object))
    }
}
