// Reading a reply's few top-level members straight from its bytes: acks are the bulk of a producer's input.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The top-level members of a one-line JSON object, as key bytes and value byte ranges, without
/// building values. Returns false when the line is not an object this scan can walk (the caller
/// then parses it fully).
func scanMembers(_ b: UnsafeBufferPointer<UInt8>, _ visit: (_ key: UnsafeBufferPointer<UInt8>, _ value: Range<Int>) -> Void) -> Bool {
    var i = 0
    let n = b.count
    func skipSpace() { while i < n, b[i] == 0x20 || b[i] == 0x09 || b[i] == 0x0D { i += 1 } }
    /// Moves past a string starting at its opening quote; false when unterminated.
    func skipString() -> Bool {
        i += 1
        while i < n {
            if b[i] == UInt8(ascii: "\\") { i += 2; continue }
            if b[i] == UInt8(ascii: "\"") { i += 1; return true }
            i += 1
        }
        return false
    }
    skipSpace()
    guard i < n, b[i] == UInt8(ascii: "{") else { return false }
    i += 1
    skipSpace()
    if i < n, b[i] == UInt8(ascii: "}") { return true }
    while i < n {
        skipSpace()
        guard i < n, b[i] == UInt8(ascii: "\"") else { return false }
        let keyStart = i + 1
        guard skipString() else { return false }
        let key = UnsafeBufferPointer(rebasing: b[keyStart..<(i - 1)])
        skipSpace()
        guard i < n, b[i] == UInt8(ascii: ":") else { return false }
        i += 1
        skipSpace()
        let valueStart = i
        var depth = 0
        while i < n {
            let c = b[i]
            if c == UInt8(ascii: "\"") { guard skipString() else { return false }; continue }
            if c == UInt8(ascii: "{") || c == UInt8(ascii: "[") { depth += 1 }
            else if c == UInt8(ascii: "}") || c == UInt8(ascii: "]") {
                if depth == 0 { break }
                depth -= 1
            } else if c == UInt8(ascii: ",") && depth == 0 { break }
            i += 1
        }
        guard i < n else { return false }
        var valueEnd = i
        while valueEnd > valueStart, b[valueEnd - 1] == 0x20 { valueEnd -= 1 }
        visit(key, valueStart..<valueEnd)
        if b[i] == UInt8(ascii: "}") { return true }
        i += 1
    }
    return false
}

func bytesEqual(_ a: UnsafeBufferPointer<UInt8>, _ b: StaticString) -> Bool {
    a.count == b.utf8CodeUnitCount && (a.count == 0 || memcmp(a.baseAddress!, b.utf8Start, a.count) == 0)
}

func parseInt(_ b: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> Int64? {
    var value: Int64 = 0
    var i = range.lowerBound
    let negative = i < range.upperBound && b[i] == UInt8(ascii: "-")
    if negative { i += 1 }
    guard i < range.upperBound else { return nil }
    while i < range.upperBound {
        let c = b[i]
        guard c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9") else { return nil }
        let (m, o1) = value.multipliedReportingOverflow(by: 10)
        let (s, o2) = m.addingReportingOverflow(Int64(c - UInt8(ascii: "0")))
        if o1 || o2 { return nil }
        value = s
        i += 1
    }
    return negative ? -value : value
}

/// What the session's thread needs of a reply: whether it is one (`ok` present), its outcome and `rid`.
struct ReplyHead: Sendable {
    var ok: Bool
    var rid: Int64?
    var hasRid: Bool

    /// nil when the line has no top-level `ok` (a delivery, a goodbye) or cannot be scanned.
    static func scan(_ line: [UInt8]) -> ReplyHead? {
        line.withUnsafeBufferPointer { b -> ReplyHead? in
            var ok: Bool?, rid: Int64?, hasRid = false
            let scanned = scanMembers(b) { key, value in
                if bytesEqual(key, "ok") { ok = b[value.lowerBound] == UInt8(ascii: "t") }
                else if bytesEqual(key, "rid") { hasRid = true; rid = parseInt(b, value) }
            }
            guard scanned, let ok else { return nil }
            return ReplyHead(ok: ok, rid: rid, hasRid: hasRid)
        }
    }
}
