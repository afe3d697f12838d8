// The global app registry: which entitlements each sending app holds.

/// What an app may do beyond the ordinary (SPEC §1, §3): granted by `registerApp`.
public struct Entitlements: OptionSet, Hashable, Sendable {
    public let rawValue: UInt8
    /// Creates one from its fields.
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    /// May send `critical` notifications.
    public static let critical = Entitlements(rawValue: 1)
    /// May send communication notifications (sender decides Focus break-through).
    public static let communication = Entitlements(rawValue: 2)
    /// Government alerts: pass the user's `allowNotifications: false`.
    public static let government = Entitlements(rawValue: 4)

    /// Wire names in a fixed order.
    public static let wireNames: [(String, Entitlements)] = [
        ("communication", .communication), ("critical", .critical), ("government", .government),
    ]
}

/// Global state: app → entitlements. Apps have none until `registerApp`.
public struct AppRegistry: Hashable, Sendable {
    private var entitlementsByApp: [String: Entitlements] = [:]
    /// The same entries, sorted by app, while there are at most `scanLimit`: every decision and
    /// every admitted submit looks up its app, and comparing a few strings is cheaper than hashing
    /// one with SipHash.
    private var few: [(app: String, entitlements: Entitlements)] = []
    /// Registries of at most this many apps are searched by comparison, larger ones by hash.
    static let scanLimit = 8

    /// Creates one from its fields.
    public init() {}

    /// The entitlements of `app` (empty when never registered).
    public func entitlements(of app: String) -> Entitlements {
        if entitlementsByApp.count > Self.scanLimit { return entitlementsByApp[app] ?? [] }
        return few.withUnsafeBufferPointer { b in
            for i in b.indices where b[i].app == app { return b[i].entitlements }
            return []
        }
    }

    /// The registry's own string for `app` when it is registered, else `app`. The fold names a
    /// user's app entries with it, so the one string of each registered app is shared by every
    /// user's entry: comparing a submit's app with an entry is then one word, and a million users
    /// hold no million copies of the same name, each a cache miss to compare.
    public func sharedName(_ app: String) -> String { registeredName(app) ?? app }

    /// The registry's own string for `app` (equal to it), nil when `app` was never registered.
    /// The door shares it with a connection's submits, so the engine's look-ups of the app
    /// compare one word instead of the bytes of two equal strings.
    public func registeredName(_ app: String) -> String? {
        if entitlementsByApp.count > Self.scanLimit {
            return entitlementsByApp.index(forKey: app).map { entitlementsByApp[$0].key }
        }
        return few.first { $0.app == app }?.app
    }

    /// Sets (replaces) the entitlements of `app`, as `registerApp` does.
    public mutating func register(_ app: String, entitlements: Entitlements) {
        entitlementsByApp[app] = entitlements
        few = entitlementsByApp.count > Self.scanLimit ? [] : entitlementsByApp.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    /// Registered apps, sorted.
    public var apps: [String] { entitlementsByApp.keys.sorted() }

    // Equality and hash of the registry's contents (`few` only mirrors them).
    public static func == (a: AppRegistry, b: AppRegistry) -> Bool { a.entitlementsByApp == b.entitlementsByApp }
    public func hash(into h: inout Hasher) { h.combine(entitlementsByApp) }
}
