// A delivery line as received: its routing members read by a scan, the rest parsed only when asked for.

/// One delivery line before it is decoded: where it sits (`partition`, `cursor`), what a filter or
/// a router needs (`app`, `kind`), and the line's bytes as the server sent them. The consumer's
/// session thread reads only these members (one pass over the line's top-level members), so a
/// reader that forwards lines as they are (a broker bridge: `HeraldConsumer.nextLines`) never
/// pays for a parse; `decoded()` builds the typed `Delivery`, on the reader's task.
public struct DeliveryLine: Sendable, Hashable {
    /// 0 while the server has one partition (the member is then absent).
    public var partition: Int
    public var cursor: Int64
    public var app: String?
    public var kind: DeliveryKind
    /// The line (canonical JSON), without its newline.
    public var bytes: [UInt8]
    /// Whether the line carried `partition` (a server with several partitions names it; acks then name it too).
    public let namesPartition: Bool

    init(partition: Int, cursor: Int64, app: String?, kind: DeliveryKind, bytes: [UInt8], namesPartition: Bool) {
        self.partition = partition; self.cursor = cursor; self.app = app; self.kind = kind; self.bytes = bytes
        self.namesPartition = namesPartition
    }

    /// The line's delivery members by a scan; nil when it is not a delivery (a reply, a goodbye) or
    /// when a member the scan reads is not plain (an escape in `app` or `kind`): parse that in full.
    static func scan(_ line: [UInt8]) -> DeliveryLine? {
        line.withUnsafeBufferPointer { b -> DeliveryLine? in
            var isDelivery = false, hasOk = false, plain = true
            var partition: Int64?, cursor: Int64?, app: String?, kind: String?
            func string(_ r: Range<Int>) -> String? {
                guard r.count >= 2, b[r.lowerBound] == UInt8(ascii: "\""), b[r.upperBound - 1] == UInt8(ascii: "\"") else { plain = false; return nil }
                let inner = UnsafeBufferPointer(rebasing: b[(r.lowerBound + 1)..<(r.upperBound - 1)])
                if inner.contains(UInt8(ascii: "\\")) { plain = false; return nil }
                return String(decoding: inner, as: UTF8.self)
            }
            let scanned = scanMembers(b) { key, value in
                if bytesEqual(key, "op") { isDelivery = bytesEqual(UnsafeBufferPointer(rebasing: b[value]), "\"delivery\"") }
                else if bytesEqual(key, "ok") { hasOk = true }
                else if bytesEqual(key, "cursor") { cursor = parseInt(b, value) }
                else if bytesEqual(key, "partition") { partition = parseInt(b, value) }
                else if bytesEqual(key, "app") { app = b[value.lowerBound] == UInt8(ascii: "n") ? nil : string(value) }
                else if bytesEqual(key, "kind") { kind = string(value) }
            }
            guard scanned, isDelivery, !hasOk, plain, let cursor else { return nil }
            return DeliveryLine(partition: Int(partition ?? 0), cursor: cursor, app: app, kind: DeliveryKind(rawValue: kind ?? ""),
                                bytes: line, namesPartition: partition != nil)
        }
    }

    /// A delivery line already parsed (what the scan left to a full parse).
    init(line: [UInt8], json o: [String: HeraldJSON]) {
        self.init(partition: Int(o["partition"]?.intValue ?? 0), cursor: o["cursor"]?.intValue ?? 0, app: o["app"]?.stringValue,
                  kind: DeliveryKind(rawValue: o["kind"]?.stringValue ?? ""), bytes: line, namesPartition: o["partition"] != nil)
    }

    /// The typed delivery: the whole line parsed.
    public func decoded() throws(HeraldError) -> Delivery {
        guard case .object(let json)? = try? HeraldJSON.parse(bytes) else {
            throw HeraldError(code: "invalid_delivery", title: "A delivery line from the server is not a JSON object",
                              detail: String(decoding: bytes.prefix(200), as: UTF8.self))
        }
        return Delivery(line: bytes, json: json)
    }
}
