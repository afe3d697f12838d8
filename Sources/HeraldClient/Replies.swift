// Typed replies: the ack of a state-changing op, the hello reply with its routes, and the delivery line.

/// Accepted, but worth fixing (docs/errors.md, "Every warning code").
public struct HeraldWarning: Sendable, Hashable {
    public var code: String, title: String, detail: String
    init(_ json: HeraldJSON) {
        code = json["code"]?.stringValue ?? ""
        title = json["title"]?.stringValue ?? json["message"]?.stringValue ?? ""
        detail = json["detail"]?.stringValue ?? ""
    }
}

/// The ack of a request: stored (or, `duplicate`, stored before) at `seq` of `partition`.
public struct Ack: Sendable, Hashable {
    /// 0 while the server has one partition (the member is then absent).
    public var partition: Int = 0
    public var seq: Int64 = 0
    public var duplicate = false
    public var warnings: [HeraldWarning] = []
    /// The reply's bytes as the server sent them (canonical JSON, without the newline).
    let bytes: [UInt8]

    /// The reply as the server sent it.
    public var line: String { String(decoding: bytes, as: UTF8.self) }

    /// Every member the server sent (a clock's `now`, a fan-out's `events`, stats' counters, …).
    public var raw: [String: HeraldJSON] { (try? HeraldJSON.parse(bytes))?.objectValue ?? [:] }

    /// Reads the four members an ack is about from the line's bytes, without a dictionary.
    init(line: [UInt8]) {
        bytes = line
        line.withUnsafeBufferPointer { b in
            _ = scanMembers(b) { key, value in
                if bytesEqual(key, "seq") { seq = parseInt(b, value) ?? 0 }
                else if bytesEqual(key, "partition") { partition = Int(parseInt(b, value) ?? 0) }
                else if bytesEqual(key, "duplicate") { duplicate = b[value.lowerBound] == UInt8(ascii: "t") }
                else if bytesEqual(key, "warnings"), value.count > 2 {
                    warnings = (try? HeraldJSON.parse(UnsafeBufferPointer(rebasing: b[value])))?.arrayValue?.map(HeraldWarning.init) ?? []
                }
            }
        }
    }
}

/// Where a partition is served: its owner's address and lease epoch (hello's `routes`).
public struct Route: Sendable, Hashable {
    public var partition: Int, address: String, epoch: Int64
}

/// The reply to hello: the roles granted and, once the server has partitions, how to route.
public struct HelloReply: Sendable, Hashable {
    public var server: String
    public var roles: [String]
    public var apps: [String]
    public var instance: String?
    /// The number of partitions (1 when the server does not say).
    public var partitions: Int
    /// The partition function's name ("fnv1a64").
    public var hash: String?
    public var routes: [Route]
    public var raw: [String: HeraldJSON]

    init(reply: [String: HeraldJSON]) {
        raw = reply
        server = reply["server"]?.stringValue ?? ""
        roles = reply["roles"]?.arrayValue?.compactMap(\.stringValue) ?? []
        apps = reply["apps"]?.arrayValue?.compactMap(\.stringValue) ?? []
        instance = reply["instance"]?.stringValue
        partitions = max(1, Int(reply["partitions"]?.intValue ?? 1))
        hash = reply["hash"]?.stringValue
        routes = Self.routes(reply["routes"])
    }

    /// Reads `routes` as a list (each with `partition`, or in partition order) or as an object keyed by partition.
    static func routes(_ json: HeraldJSON?) -> [Route] {
        func route(_ p: Int, _ r: HeraldJSON) -> Route? {
            if let address = r.stringValue { return Route(partition: p, address: address, epoch: 0) }
            guard let address = (r["address"] ?? r["owner"] ?? r["advertise"])?.stringValue else { return nil }
            return Route(partition: Int(r["partition"]?.intValue ?? Int64(p)), address: address, epoch: r["epoch"]?.intValue ?? 0)
        }
        switch json {
        case .array(let list)?: return list.enumerated().compactMap { route($0.offset, $0.element) }
        case .object(let byPartition)?: return byPartition.compactMap { key, r in Int(key).flatMap { route($0, r) } }.sorted { $0.partition < $1.partition }
        default: return []
        }
    }
}

/// What a delivery decided (docs/protocol.md, "The delivery line"); unknown kinds are kept as they are.
public struct DeliveryKind: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }
    public static let alert = Self(rawValue: "alert"), quiet = Self(rawValue: "quiet"), queued = Self(rawValue: "queued")
    public static let held = Self(rawValue: "held"), summary = Self(rawValue: "summary"), focusDigest = Self(rawValue: "focusDigest")
    public static let suppressed = Self(rawValue: "suppressed"), expired = Self(rawValue: "expired"), replaced = Self(rawValue: "replaced")
    public static let withdrawn = Self(rawValue: "withdrawn"), cleared = Self(rawValue: "cleared")
}

public struct Presentation: Sendable, Hashable {
    public var banner: Bool, sound: Bool, lockScreen: Bool, notificationCenter: Bool, overrideSilent: Bool
    /// The app's new badge count; nil when the app's badge setting is off.
    public var badge: Int?
    init(_ j: HeraldJSON) {
        banner = j["banner"]?.boolValue ?? false; sound = j["sound"]?.boolValue ?? false
        lockScreen = j["lockScreen"]?.boolValue ?? false; notificationCenter = j["notificationCenter"]?.boolValue ?? false
        overrideSilent = j["overrideSilent"]?.boolValue ?? false; badge = j["badge"]?.intValue.map { Int($0) }
    }
}

/// A notification's content as the user's `showPreviews` allows.
public struct Content: Sendable, Hashable {
    public var title: String?, subtitle: String?, body: String?, hiddenPreviewsBodyPlaceholder: String?
    public var interruptionLevel: String?, relevanceScore: Double?, sound: String?, threadId: String?
    public var actions: [HeraldJSON]?, communication: HeraldJSON?, data: [String: HeraldJSON]?
    public var raw: [String: HeraldJSON]
    init(_ j: [String: HeraldJSON]) {
        raw = j
        title = j["title"]?.stringValue; subtitle = j["subtitle"]?.stringValue; body = j["body"]?.stringValue
        hiddenPreviewsBodyPlaceholder = j["hiddenPreviewsBodyPlaceholder"]?.stringValue
        interruptionLevel = j["interruptionLevel"]?.stringValue; relevanceScore = j["relevanceScore"]?.doubleValue
        sound = j["sound"]?.stringValue; threadId = j["threadId"]?.stringValue
        actions = j["actions"]?.arrayValue; communication = j["communication"]; data = j["data"]?.objectValue
    }
}

/// One delivery line: a decision of the engine at `cursor` of `partition`'s delivery stream.
public struct Delivery: Sendable, Hashable {
    /// 0 while the server has one partition (the member is then absent).
    public var partition: Int
    public var cursor: Int64
    public var kind: DeliveryKind
    public var user: String
    public var app: String?
    public var notification: String?
    /// The decision's engine time, RFC 3339.
    public var at: String
    /// The rule that decided (`delivered`, `focus_held`, …).
    public var reason: String
    public var rulesVersion: String?
    public var causeSeq: Int64?
    public var presentation: Presentation?
    public var content: Content?
    /// A summary's or digest's items.
    public var items: [HeraldJSON]?
    public var summaryAt: String?, focus: String?, replaces: String?
    public var provisional: Bool, timeSensitiveIntro: Bool, snoozed: Bool
    public var part: Int?, parts: Int?
    /// Every member of the line.
    public var raw: [String: HeraldJSON]
    /// The line as the server sent it (canonical JSON, without the newline).
    public var line: String
    /// Whether the line carried `partition` (servers with partitions name it; acks then name it too).
    let namesPartition: Bool

    init(line: [UInt8], json o: [String: HeraldJSON]) {
        self.line = String(decoding: line, as: UTF8.self)
        raw = o
        namesPartition = o["partition"] != nil
        partition = Int(o["partition"]?.intValue ?? 0)
        cursor = o["cursor"]?.intValue ?? 0
        kind = DeliveryKind(rawValue: o["kind"]?.stringValue ?? "")
        user = o["user"]?.stringValue ?? ""
        app = o["app"]?.stringValue; notification = o["notification"]?.stringValue
        at = o["at"]?.stringValue ?? ""; reason = o["reason"]?.stringValue ?? ""
        rulesVersion = o["rulesVersion"]?.stringValue; causeSeq = o["causeSeq"]?.intValue
        presentation = o["presentation"].map(Presentation.init)
        content = o["content"]?.objectValue.map(Content.init)
        items = o["items"]?.arrayValue
        summaryAt = o["summaryAt"]?.stringValue; focus = o["focus"]?.stringValue; replaces = o["replaces"]?.stringValue
        provisional = o["provisional"]?.boolValue ?? false; timeSensitiveIntro = o["timeSensitiveIntro"]?.boolValue ?? false
        snoozed = o["snoozed"]?.boolValue ?? false
        part = o["part"]?.intValue.map { Int($0) }; parts = o["parts"]?.intValue.map { Int($0) }
    }
}
