// A consumer's delivery filter (`subscribe`'s `filter: {apps, kinds}`): validated from the wire, matched per delivery.

/// Which deliveries a consumer is sent: those whose kind is in `kinds` and whose app is in `apps`
/// (a list left out takes every value). Lines it leaves out still advance the consumer's cursor.
/// Matching reads a kind bit and, with an app list, one set look-up: no JSON is parsed per line.
public struct ConsumerFilter: Hashable, Sendable {
    /// The kinds sent, nil: every kind.
    public let kinds: Set<DeliveryKind>?
    /// The apps sent, nil: every app. A delivery without an app (none today) matches only without a list.
    public let apps: Set<String>?
    /// One bit per `DeliveryKind` (its index in `allCases`) that is sent.
    private let kindBits: UInt32
    /// A short app list, compared in turn: `==` of two strings is a length check and a memcmp (an
    /// identical string, as the app registry shares them, a word compare), cheaper than hashing
    /// the app for a set look-up. Nil: `apps` is looked up.
    private let fewApps: [String]?

    /// The most apps one filter lists (a filter is sent once per subscribe and kept per stream).
    public static let maxApps = 1_000

    public init(kinds: Set<DeliveryKind>?, apps: Set<String>?) {
        self.kinds = kinds
        self.apps = apps
        var bits: UInt32 = 0
        for (i, kind) in DeliveryKind.allCases.enumerated() where kinds?.contains(kind) ?? true { bits |= 1 << UInt32(i) }
        kindBits = bits
        fewApps = apps.flatMap { $0.count <= 8 ? $0.sorted() : nil }
    }

    /// The filter a `subscribe` carries: nil when it has none. Refuses what is not an object of
    /// non-empty string lists, unknown members, unknown kinds and empty lists (which would send nothing).
    public static func parse(_ value: JSONValue?) -> Result<ConsumerFilter?, RequestError> {
        guard let value, value != .null else { return .success(nil) }
        guard let members = value.objectValue else {
            return .failure(invalid("“filter” is \(article(value.typeName)) \(value.typeName), not an object",
                "Send \"filter\":{\"apps\":[\"…\"],\"kinds\":[\"alert\",…]} (either list may be left out), or no filter to receive every delivery."))
        }
        if let unknown = members.keys.sorted().first(where: { $0 != "apps" && $0 != "kinds" }) {
            return .failure(invalid("“filter” has an unknown member “\(clipped(unknown))”",
                "A filter has two members, \"apps\" and \"kinds\" (lists of strings). A misspelt one would have sent every delivery."))
        }
        var kinds: Set<DeliveryKind>?
        if let list = members["kinds"] {
            switch strings(list, member: "kinds") {
            case .failure(let error): return .failure(error)
            case .success(let names):
                var set = Set<DeliveryKind>()
                for name in names {
                    guard let kind = DeliveryKind(rawValue: name) else {
                        return .failure(invalid("“filter.kinds” names an unknown delivery kind “\(clipped(name))”",
                            "Delivery kinds are \(DeliveryKind.allCases.map(\.rawValue).joined(separator: ", ")) (case matters)."))
                    }
                    set.insert(kind)
                }
                kinds = set
            }
        }
        var apps: Set<String>?
        if let list = members["apps"] {
            switch strings(list, member: "apps") {
            case .failure(let error): return .failure(error)
            case .success(let names):
                guard names.count <= maxApps else {
                    return .failure(invalid("“filter.apps” lists \(names.count) apps, more than \(maxApps)",
                        "List at most \(maxApps) apps, or leave \"apps\" out to receive every app's deliveries."))
                }
                if let empty = names.firstIndex(where: \.isEmpty) {
                    return .failure(invalid("“filter.apps” item \(empty) is an empty string", "List app names as registered (registerApp)."))
                }
                apps = Set(names)
            }
        }
        return .success(ConsumerFilter(kinds: kinds, apps: apps))
    }

    /// A non-empty list of strings.
    private static func strings(_ value: JSONValue, member: String) -> Result<[String], RequestError> {
        guard let items = value.arrayValue else {
            return .failure(invalid("“filter.\(member)” is \(article(value.typeName)) \(value.typeName), not a list",
                "Send \"\(member)\" as a list of strings, e.g. [\"…\"]."))
        }
        guard !items.isEmpty else {
            return .failure(invalid("“filter.\(member)” is an empty list, which would send no delivery at all",
                "List at least one value, or leave \"\(member)\" out to receive every one."))
        }
        var names: [String] = []
        names.reserveCapacity(items.count)
        for (i, item) in items.enumerated() {
            guard let s = item.stringValue else {
                return .failure(invalid("“filter.\(member)” item \(i) is \(article(item.typeName)) \(item.typeName), not a string",
                    "Send \"\(member)\" as a list of strings."))
            }
            names.append(s)
        }
        return .success(names)
    }

    private static func invalid(_ title: String, _ detail: String) -> RequestError {
        RequestError(code: "invalid_filter", title: title, detail: detail)
    }

    private static func article(_ word: String) -> String { "aeiou".contains(word.first ?? "x") ? "an" : "a" }

    /// The canonical form (sorted lists; stored in `consumers.filter` and shown by `consumers`).
    public var json: JSONValue {
        var o: [String: JSONValue] = [:]
        if let kinds { o["kinds"] = .array(DeliveryKind.allCases.filter(kinds.contains).map { .string($0.rawValue) }) }
        if let apps { o["apps"] = .array(apps.sorted().map { .string($0) }) }
        return .object(o)
    }

    /// Whether a delivery of this kind (`kindCode`) and app is sent.
    @inline(__always)
    public func matches(kindCode: UInt8, app: String?) -> Bool {
        guard kindCode < 32 ? kindBits & (1 << UInt32(kindCode)) != 0 : kinds == nil else { return false }
        guard let apps else { return true }
        guard let app else { return false }
        if let fewApps {
            for candidate in fewApps where candidate == app { return true }
            return false
        }
        return apps.contains(app)
    }

    /// The kind's index in `DeliveryKind.allCases` (what `matches` takes), from its stored name:
    /// its length and first byte tell every kind apart, so no string is compared. 0xFF: unknown.
    @inline(__always)
    public static func kindCode(of kind: String) -> UInt8 {
        let utf8 = kind.utf8
        let count = utf8.count
        let first = utf8.first ?? 0
        let code: UInt8 = switch (count, first) {
        case (5, UInt8(ascii: "a")): 0   // alert
        case (5, UInt8(ascii: "q")): 1   // quiet
        case (6, UInt8(ascii: "q")): 2   // queued
        case (4, UInt8(ascii: "h")): 3   // held
        case (7, UInt8(ascii: "s")): 4   // summary
        case (11, UInt8(ascii: "f")): 5  // focusDigest
        case (10, UInt8(ascii: "s")): 6  // suppressed
        case (7, UInt8(ascii: "e")): 7   // expired
        case (8, UInt8(ascii: "r")): 8   // replaced
        case (9, UInt8(ascii: "w")): 9   // withdrawn
        case (7, UInt8(ascii: "c")): 10  // cleared
        default: 0xFF
        }
        return code
    }
}
