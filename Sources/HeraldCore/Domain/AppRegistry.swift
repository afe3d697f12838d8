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

    /// Creates one from its fields.
    public init() {}

    /// The entitlements of `app` (empty when never registered).
    public func entitlements(of app: String) -> Entitlements {
        entitlementsByApp.isEmpty ? [] : (entitlementsByApp[app] ?? [])  // most logs register no app: skip the hash
    }

    /// Sets (replaces) the entitlements of `app`, as `registerApp` does.
    public mutating func register(_ app: String, entitlements: Entitlements) {
        entitlementsByApp[app] = entitlements
    }

    /// Registered apps, sorted.
    public var apps: [String] { entitlementsByApp.keys.sorted() }
}
