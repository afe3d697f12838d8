// The few members of a delivery line a bridge routes by, read without building the JSON tree.

/// `op`, `cursor`, `partition`, `app` and `kind` of a line from Herald, found by one pass over its
/// top-level members (nested values are skipped byte by byte): the bridge reads every delivery
/// line, and parsing each into a `JSONValue` tree cost more than publishing it. Nil for what this
/// scan does not read (not an object, an escape in a routed string, malformed): parse that in full.
public struct DeliveryLineFields: Equatable, Sendable {
    public var op: String?
    public var cursor: Int64?
    public var partition: Int64?
    public var app: String?
    public var kind: String?

    public init(op: String? = nil, cursor: Int64? = nil, partition: Int64? = nil, app: String? = nil, kind: String? = nil) {
        self.op = op; self.cursor = cursor; self.partition = partition; self.app = app; self.kind = kind
    }

    public static func scan(_ line: UnsafeRawBufferPointer) -> DeliveryLineFields? {
        let b = line.bindMemory(to: UInt8.self)
        let n = b.count
        var i = 0
        func skipSpace() { while i < n && (b[i] == 0x20 || b[i] == 0x09 || b[i] == 0x0A || b[i] == 0x0D) { i += 1 } }
        /// A string's bytes (at its opening quote); nil if it has an escape or does not end.
        func plainString() -> UnsafeBufferPointer<UInt8>? {
            guard i < n, b[i] == 0x22 else { return nil }
            let start = i + 1
            var j = start
            while j < n && b[j] != 0x22 {
                if b[j] == 0x5C { return nil }
                j += 1
            }
            guard j < n else { return nil }
            i = j + 1
            return UnsafeBufferPointer(rebasing: b[start..<j])
        }
        func skipString() -> Bool {
            i += 1
            while i < n {
                if b[i] == 0x5C { i += 2; continue }
                if b[i] == 0x22 { i += 1; return true }
                i += 1
            }
            return false
        }
        func skipValue() -> Bool {
            guard i < n else { return false }
            switch b[i] {
            case 0x22: return skipString()
            case 0x7B, 0x5B:
                var depth = 0
                while i < n {
                    switch b[i] {
                    case 0x22: if !skipString() { return false }; continue
                    case 0x7B, 0x5B: depth += 1
                    case 0x7D, 0x5D:
                        depth -= 1
                        if depth == 0 { i += 1; return true }
                    default: break
                    }
                    i += 1
                }
                return false
            default:
                while i < n && b[i] != 0x2C && b[i] != 0x7D && b[i] != 0x20 && b[i] != 0x0A { i += 1 }
                return true
            }
        }
        func integer() -> Int64? {
            var negative = false
            if i < n && b[i] == 0x2D { negative = true; i += 1 }
            var v: Int64 = 0, digits = 0
            while i < n, b[i] >= 0x30, b[i] <= 0x39 {
                let (m, o1) = v.multipliedReportingOverflow(by: 10)
                let (a, o2) = m.addingReportingOverflow(Int64(b[i] - 0x30))
                guard !o1 && !o2 else { return nil }
                v = a; digits += 1; i += 1
            }
            guard digits > 0, i >= n || (b[i] != 0x2E && b[i] != 0x65 && b[i] != 0x45) else { return nil }
            return negative ? -v : v
        }
        func equals(_ key: UnsafeBufferPointer<UInt8>, _ name: StaticString) -> Bool {
            guard key.count == name.utf8CodeUnitCount else { return false }
            let p = name.utf8Start
            for k in 0..<key.count where key[k] != p[k] { return false }
            return true
        }
        var fields = DeliveryLineFields()
        skipSpace()
        guard i < n, b[i] == 0x7B else { return nil }
        i += 1
        skipSpace()
        if i < n && b[i] == 0x7D { return fields }
        while true {
            skipSpace()
            guard let key = plainString() else { return nil }
            skipSpace()
            guard i < n, b[i] == 0x3A else { return nil }
            i += 1
            skipSpace()
            if equals(key, "cursor") || equals(key, "partition") {
                guard let v = integer() else { return nil }
                if key.count == 6 { fields.cursor = v } else { fields.partition = v }
            } else if equals(key, "op") || equals(key, "app") || equals(key, "kind") {
                guard i < n, b[i] == 0x22 else {
                    guard skipValue() else { return nil }
                    skipSpace()
                    if i < n && b[i] == 0x2C { i += 1; continue }
                    return i < n && b[i] == 0x7D ? fields : nil
                }
                guard let s = plainString() else { return nil }
                let text = String(decoding: s, as: UTF8.self)
                switch key.count {
                case 2: fields.op = text
                case 3: fields.app = text
                default: fields.kind = text
                }
            } else {
                guard skipValue() else { return nil }
            }
            skipSpace()
            guard i < n else { return nil }
            if b[i] == 0x2C { i += 1; continue }
            return b[i] == 0x7D ? fields : nil
        }
    }
}
