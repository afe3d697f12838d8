// Who may do what: tokens, roles, and which role each op needs.

/// The four kinds of clients (SPEC §1) plus operators.
public enum Role: String, Hashable, Sendable, CaseIterable {
    case producer, settings, consumer, admin
}

/// What a valid hello grants a connection.
public struct Grant: Hashable, Sendable {
    public var name: String
    public var roles: Set<Role>
    /// Apps a producer may act for; nil means any app.
    public var apps: Set<String>?

    public init(name: String, roles: Set<Role>, apps: Set<String>?) {
        self.name = name; self.roles = roles; self.apps = apps
    }

    /// Dev mode: everything, for every app.
    public static let everything = Grant(name: "dev", roles: Set(Role.allCases), apps: nil)

    public func mayActFor(app: String) -> Bool { apps.map { $0.contains(app) } ?? true }
}

/// The configured tokens. Empty means dev mode: every hello is granted every role.
public struct TokenTable: Sendable {
    private var grants: [String: Grant]

    public init(_ grants: [String: Grant] = [:]) { self.grants = grants }

    public var isDevMode: Bool { grants.isEmpty }

    public func grant(for token: String?) -> Grant? {
        if isDevMode { return .everything }
        guard let token else { return nil }
        return grants[token]
    }

    /// Parses a tokens file: `{"tokens":[{"name":"mail","token":"…","roles":["producer"],"apps":["com.example.mail"]}]}`.
    public static func parse(_ json: JSONValue) throws(RequestError) -> TokenTable {
        func bad(_ why: String) -> RequestError {
            RequestError(code: "invalid_tokens_file", title: "The tokens file is not valid", detail: why)
        }
        guard let list = json["tokens"]?.arrayValue else { throw bad("It must be an object with a \"tokens\" array.") }
        var grants: [String: Grant] = [:]
        for (i, entry) in list.enumerated() {
            guard let token = entry["token"]?.stringValue, token.utf8.count >= 8 else {
                throw bad("Entry \(i) needs a \"token\" string of at least 8 characters.")
            }
            var roles = Set<Role>()
            for r in entry["roles"]?.arrayValue ?? [] {
                guard let name = r.stringValue, let role = Role(rawValue: name) else {
                    throw bad("Entry \(i) has an unknown role \(r.canonicalString); roles are producer, settings, consumer, admin.")
                }
                roles.insert(role)
            }
            if roles.isEmpty { throw bad("Entry \(i) grants no roles.") }
            let apps = entry["apps"]?.arrayValue.map { Set($0.compactMap(\.stringValue)) }
            if roles.contains(.producer) && apps == nil {
                throw bad("Entry \(i) is a producer without an \"apps\" list; list the apps it may submit for.")
            }
            if grants[token] != nil { throw bad("Entry \(i) repeats a token.") }
            grants[token] = Grant(name: entry["name"]?.stringValue ?? "token-\(i)", roles: roles, apps: apps)
        }
        return TokenTable(grants)
    }
}

/// The role each op needs; ops absent here (hello, ping, stats) need none.
public enum OpAccess {
    public static let requiredRole: [String: Role] = [
        "submit": .producer, "withdraw": .producer,
        "authorization": .settings, "settings": .settings, "provisionalKeep": .settings,
        "provisionalTurnOff": .settings, "summarySchedule": .settings, "focusDefine": .settings,
        "focusOn": .settings, "focusOff": .settings, "mute": .settings, "opened": .settings,
        "badgeClear": .settings, "snooze": .settings,
        "subscribe": .consumer, "ack": .consumer,
        "registerApp": .admin, "clock": .admin,
    ]
    public static let openOps: Set<String> = ["hello", "ping", "stats"]

    /// Every op of the protocol, in SPEC §5's order (for error texts). A test checks it names
    /// exactly the ops of `requiredRole` and `openOps`.
    public static let knownOps: [String] = [
        "hello", "ping", "stats", "submit", "withdraw", "authorization", "settings", "provisionalKeep",
        "provisionalTurnOff", "summarySchedule", "focusDefine", "focusOn", "focusOff", "mute", "snooze",
        "opened", "badgeClear", "registerApp", "subscribe", "ack", "clock",
    ]
}
