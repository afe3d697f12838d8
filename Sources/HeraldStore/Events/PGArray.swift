// Encodes values as PostgreSQL arrays, so one statement carries a whole batch of rows.

/// Text-format array literals (`{"a","b",NULL}`) for `unnest($1::text[], …)` batch statements.
/// Every element is quoted; `"` and `\` are escaped; nil is SQL NULL.
/// Kept for tools and tests; the writer's hot path sends binary arrays (`PGBinaryParameters`).
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

/// Binary-format (`array_send` layout) one-dimensional arrays, all parameters of one statement
/// packed in one buffer. Why binary: the server's text `array_in` scans and unescapes every
/// byte of every body and the Swift side had to escape them one scalar at a time; the binary
/// form is a length prefix and a memcpy on both sides.
/// Text elements still go through the server's encoding check, so a NUL byte is refused, not truncated.
struct PGBinaryParameters {
    /// Element type OIDs (pg_type.h); the server checks them against the `$n::type[]` casts.
    static let textOID: UInt32 = 25
    static let int8OID: UInt32 = 20
    static let int4OID: UInt32 = 23
    static let timestamptzOID: UInt32 = 1184

    /// 2000-01-01T00:00:00Z in milliseconds since the Unix epoch: PostgreSQL's timestamp origin.
    static let postgresEpochMilliseconds: Int64 = 946_684_800_000

    private(set) var bytes: [UInt8] = []
    /// Where each parameter lies in `bytes`, in parameter order.
    private(set) var ranges: [Range<Int>] = []

    init(capacity: Int = 0) { bytes.reserveCapacity(capacity) }

    /// Parameters already laid out (`DeliveryBatch.parameters` writes them in one pass).
    init(bytes: [UInt8], ranges: [Range<Int>]) { self.bytes = bytes; self.ranges = ranges }

    var count: Int { ranges.count }

    private mutating func be32(_ v: UInt32) {
        withUnsafeBytes(of: v.bigEndian) { bytes.append(contentsOf: $0) }
    }

    private mutating func be64(_ v: UInt64) {
        withUnsafeBytes(of: v.bigEndian) { bytes.append(contentsOf: $0) }
    }

    /// Header of a one-dimensional array with lower bound 1.
    private mutating func header(count: Int, hasNull: Bool, element: UInt32) {
        be32(1)
        be32(hasNull ? 1 : 0)
        be32(element)
        be32(UInt32(count))
        be32(1)
    }

    /// `text[]`; nil elements are SQL NULL.
    mutating func appendText<C: Collection>(_ values: C) where C.Element == String? {
        let start = bytes.count
        let hasNull = values.contains { $0 == nil }
        header(count: values.count, hasNull: hasNull, element: Self.textOID)
        for value in values {
            guard let value else { be32(UInt32(bitPattern: -1)); continue }
            value.withUTF8Bytes { utf8 in
                be32(UInt32(utf8.count))
                bytes.append(contentsOf: utf8)
            }
        }
        ranges.append(start..<bytes.count)
    }

    mutating func appendText<C: Collection>(_ values: C) where C.Element == String {
        appendText(values.lazy.map { Optional($0) })
    }

    /// `text[]` from elements already UTF-8 bytes (no nulls): a length and a memcpy each.
    mutating func appendText<C: Collection>(bytes values: C) where C.Element == [UInt8] {
        let start = bytes.count
        header(count: values.count, hasNull: false, element: Self.textOID)
        for value in values {
            be32(UInt32(value.count))
            bytes.append(contentsOf: value)
        }
        ranges.append(start..<bytes.count)
    }

    /// `bigint[]`.
    mutating func appendInt64<C: Collection>(_ values: C) where C.Element == Int64 {
        appendIntegers(values, element: Self.int8OID)
    }

    /// `integer[]`.
    mutating func appendInt32<C: Collection>(_ values: C) where C.Element == Int32 {
        appendIntegers(values, element: Self.int4OID)
    }

    /// An array of fixed-width integers: each element its byte length and its big-endian bytes.
    private mutating func appendIntegers<C: Collection>(_ values: C, element: UInt32) where C.Element: FixedWidthInteger {
        let start = bytes.count
        header(count: values.count, hasNull: false, element: element)
        for value in values {
            be32(UInt32(MemoryLayout<C.Element>.size))
            withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
        }
        ranges.append(start..<bytes.count)
    }

    /// `timestamptz[]` (integer microseconds since 2000-01-01 UTC): exact, no text round trip.
    mutating func appendTimestamptz<C: Collection>(_ values: C) where C.Element == Int64 {
        let start = bytes.count
        header(count: values.count, hasNull: false, element: Self.timestamptzOID)
        for ms in values {
            be32(8)
            be64(UInt64(bitPattern: (ms - Self.postgresEpochMilliseconds) * 1000))
        }
        ranges.append(start..<bytes.count)
    }
}
