// The writer's pipelined path: rows as the binary array parameters of the prepared append statements.
import HeraldCore

/// Parameters of the batch event insert: one binary array per column.
enum EventBatch {
    static func parameters(_ rows: [EventRow]) -> PGBinaryParameters {
        var capacity = 120
        for r in rows { capacity += r.bodyBytes.count + (r.user?.utf8.count ?? 0) + (r.app?.utf8.count ?? 0)
                                    + (r.notificationId?.utf8.count ?? 0) + r.type.utf8.count + 48 }
        var p = PGBinaryParameters(capacity: capacity)
        p.appendText(rows.lazy.map(\.user))
        p.appendText(rows.lazy.map(\.type))
        p.appendText(rows.lazy.map(\.app))
        p.appendText(rows.lazy.map(\.notificationId))
        p.appendText(bytes: rows.lazy.map(\.bodyBytes))
        p.appendTimestamptz(rows.lazy.map(\.engineTime.millisecondsSinceEpoch))
        p.appendInt32(rows.lazy.map(\.recipientIndex))
        return p
    }
}

/// Parameters of the batch delivery insert: one binary array per column, written in one pass
/// into a buffer of the exact size: a length and a memcpy per element, no per-element `String`
/// copies or generic appends (a summary storm encodes millions of rows).
enum DeliveryBatch {
    static func parameters(_ rows: [DeliveryRow]) -> PGBinaryParameters {
        let n = rows.count
        let header = 20, element = 4
        var total = 0
        func textColumn(_ length: (DeliveryRow) -> Int?) -> Int {
            var size = header
            for r in rows { size += element + (length(r) ?? 0) }
            return size
        }
        let sizes = [
            textColumn { $0.user.utf8.count },
            header + n * 12, header + n * 12,
            textColumn { $0.kind.utf8.count },
            textColumn { $0.app?.utf8.count },
            textColumn { $0.notificationId?.utf8.count },
            textColumn { $0.reason.utf8.count },
            header + n * 12,
            textColumn { $0.rulesVersion.utf8.count },
            textColumn { $0.traceBytes.count },
            textColumn { $0.bodyBytes.count },
        ]
        var ranges: [Range<Int>] = []
        ranges.reserveCapacity(sizes.count)
        for size in sizes { ranges.append(total..<(total + size)); total += size }
        let bytes = [UInt8](unsafeUninitializedCapacity: total) { buffer, initialized in
            var w = BigEndianWriter(base: UnsafeMutableRawPointer(buffer.baseAddress!))
            func text(_ value: (DeliveryRow) -> String?) {
                let hasNull = rows.contains { value($0) == nil }
                w.header(count: n, hasNull: hasNull, element: PGBinaryParameters.textOID)
                for r in rows {
                    guard let v = value(r) else { w.be32(UInt32(bitPattern: -1)); continue }
                    v.withUTF8Bytes { w.be32(UInt32($0.count)); w.copy(UnsafeRawBufferPointer($0)) }
                }
            }
            func bytes(_ value: (DeliveryRow) -> [UInt8]) {
                w.header(count: n, hasNull: false, element: PGBinaryParameters.textOID)
                for r in rows { value(r).withUnsafeBytes { w.be32(UInt32($0.count)); w.copy($0) } }
            }
            func int64(_ element: UInt32, _ value: (DeliveryRow) -> Int64) {
                w.header(count: n, hasNull: false, element: element)
                for r in rows { w.be32(8); w.be64(UInt64(bitPattern: value(r))) }
            }
            text { $0.user }
            int64(PGBinaryParameters.int8OID) { $0.userIndex }
            int64(PGBinaryParameters.int8OID) { $0.causeSeq }
            text { $0.kind }
            text { $0.app }
            text { $0.notificationId }
            text { $0.reason }
            int64(PGBinaryParameters.timestamptzOID) { ($0.at.millisecondsSinceEpoch - PGBinaryParameters.postgresEpochMilliseconds) * 1000 }
            text { $0.rulesVersion }
            bytes { $0.traceBytes }
            bytes { $0.bodyBytes }
            precondition(w.at == total, "delivery parameters: wrote \(w.at) bytes of \(total)")
            initialized = total
        }
        return PGBinaryParameters(bytes: bytes, ranges: ranges)
    }
}

extension BigEndianWriter {
    /// Header of a one-dimensional array with lower bound 1 (as `PGBinaryParameters`).
    mutating func header(count: Int, hasNull: Bool, element: UInt32) {
        be32(1); be32(hasNull ? 1 : 0); be32(element); be32(UInt32(count)); be32(1)
    }
}
