// The op registry: every op of the protocol with its wire name, role, fields, stored event and path.

/// Every op of the protocol, in SPEC §5's order (error texts list them so). The case name is the
/// wire name. Adding an op means a case here, its entry in `definition`, and its handler where its
/// `path` says (the runtime's dispatch switches over `Op`, so the compiler asks for it).
public enum Op: UInt8, CaseIterable, Hashable, Sendable {
    case hello, ping, stats, submit, withdraw, authorization, settings, provisionalKeep, provisionalTurnOff,
         summarySchedule, focusDefine, focusOn, focusOff, mute, snooze, opened, badgeClear, registerApp, erase,
         subscribe, ack, consumers, deleteConsumer, clock

    /// Who carries an op out once the session has checked its role.
    public enum Path: Sendable {
        /// Answered by the connection's `ClientSession` itself (never dispatched).
        case session
        /// Checked and normalized by the door (`Engine.admit`), then stored as one event or more.
        case door
        /// Carried out by the service (`HeraldService`): not stored through the door.
        case service
    }

    /// One op's registry entry.
    public struct Entry: Sendable {
        /// The role a connection's grant needs to send it; nil: any connection (after hello, but
        /// hello and ping need none at all).
        public let role: Role?
        /// Who carries it out.
        public let path: Path
        /// The request members it reads, besides the envelope (`op`, `rid`, `token`): the door
        /// warns about any other (`unknown_field`); the session and service ops ignore others.
        public let fields: Set<String>
        /// The stored event type, when accepting the op appends events.
        public let stores: EventKind?
    }

    /// The registry: one entry per op.
    private var definition: Entry {
        switch self {
        case .hello: Entry(role: nil, path: .session, fields: ["token"], stores: nil)
        case .ping: Entry(role: nil, path: .session, fields: [], stores: nil)
        case .stats: Entry(role: nil, path: .service, fields: [], stores: nil)
        case .submit:
            Entry(role: .producer, path: .door, fields: [
                "id", "app", "user", "users", "interruptionLevel", "title", "subtitle", "body",
                "hiddenPreviewsBodyPlaceholder", "threadId", "collapseId", "relevanceScore", "sound", "actions",
                "communication", "marketing", "deliverAt", "expiresAt", "relevantAt", "data",
            ], stores: .submit)
        case .withdraw: Entry(role: .producer, path: .door, fields: ["app", "id", "user"], stores: .withdraw)
        case .authorization:
            Entry(role: .settings, path: .door, fields: ["user", "app", "status", "options"], stores: .authorization)
        case .settings:
            Entry(role: .settings, path: .door, fields: [
                "user", "app", "alert", "sound", "badge", "lockScreen", "notificationCenter", "showPreviews",
                "timeSensitive", "delivery", "marketingConsent", "allowNotifications", "attentionBudget",
            ], stores: .settings)
        case .provisionalKeep:
            Entry(role: .settings, path: .door, fields: ["user", "app", "delivery"], stores: .provisionalKeep)
        case .provisionalTurnOff:
            Entry(role: .settings, path: .door, fields: ["user", "app"], stores: .provisionalTurnOff)
        case .summarySchedule:
            Entry(role: .settings, path: .door, fields: ["user", "times", "timeZone"], stores: .summarySchedule)
        case .focusDefine:
            Entry(role: .settings, path: .door,
                  fields: ["user", "focus", "allowedPeople", "allowedApps", "allowTimeSensitive", "schedule", "timeZone"],
                  stores: .focusDefine)
        case .focusOn: Entry(role: .settings, path: .door, fields: ["user", "focus", "until"], stores: .focusOn)
        case .focusOff: Entry(role: .settings, path: .door, fields: ["user", "focus"], stores: .focusOff)
        case .mute: Entry(role: .settings, path: .door, fields: ["user", "app", "until"], stores: .mute)
        case .snooze: Entry(role: .settings, path: .door, fields: ["user", "app", "id", "until"], stores: .snooze)
        case .opened: Entry(role: .settings, path: .door, fields: ["user", "app", "id"], stores: .opened)
        case .badgeClear: Entry(role: .settings, path: .door, fields: ["user", "app"], stores: .badgeClear)
        case .registerApp: Entry(role: .admin, path: .door, fields: ["app", "entitlements"], stores: .registerApp)
        case .subscribe: Entry(role: .consumer, path: .service, fields: ["consumer", "from", "filter", "ephemeral", "partitions"], stores: nil)
        case .ack: Entry(role: .consumer, path: .service, fields: ["consumer", "cursor"], stores: nil)
        // Consumer administration: every durable consumer's position, lag, filter and members; and
        // deleting one (its live connections are closed, its cursor removed).
        case .consumers: Entry(role: .admin, path: .service, fields: [], stores: nil)
        case .deleteConsumer: Entry(role: .admin, path: .service, fields: ["consumer"], stores: nil)
        // The manual clock's move is stored as an event of its own (a restart resumes there).
        case .clock: Entry(role: .admin, path: .service, fields: ["advanceTo"], stores: .clock)
        // Erasure (SPEC §14): the user's content keys are deleted, the erasure stored as an event.
        case .erase: Entry(role: .admin, path: .door, fields: ["user"], stores: .erase)
        }
    }

    /// The entries, built once and indexed by `rawValue` (`entry` is read per request).
    private static let entries: [Entry] = allCases.map(\.definition)
    /// The wire names (the case names), indexed by `rawValue`.
    private static let names: [String] = allCases.map { String(describing: $0) }
    /// Ops by wire name: one hash look-up per request line (not a string compare per case).
    private static let byName: [String: Op] = Dictionary(uniqueKeysWithValues: allCases.map { (names[Int($0.rawValue)], $0) })

    /// The op a request's `op` string names, nil for none.
    public init?(named name: String) {
        guard let op = Self.byName[name] else { return nil }
        self = op
    }

    /// The wire name.
    public var name: String { Self.names[Int(rawValue)] }
    /// This op's registry entry.
    public var entry: Entry { Self.entries[Int(rawValue)] }
    /// The role its sender's grant needs (nil: none).
    public var requiredRole: Role? { entry.role }
    /// Who carries it out.
    public var path: Path { entry.path }
    /// The request members it reads.
    public var fields: Set<String> { entry.fields }

    /// The wire names of every op, in SPEC §5's order (for error texts).
    public static let knownNames: [String] = names
    /// The wire names of the ops the door admits, in SPEC §5's order.
    public static let admittedNames: [String] = allCases.filter { $0.path == .door }.map(\.name)
}
