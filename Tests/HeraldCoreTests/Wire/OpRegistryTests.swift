// The op registry covers every op, and each op's role, fields, stored event and path are what the protocol says.
@testable import HeraldCore
import Testing

@Suite struct OpRegistryTests {
    /// The protocol's ops in SPEC §5's order, and the role each needs (nil: none), as the
    /// parallel tables the registry replaced had them.
    static let roles: [(String, Role?)] = [
        ("hello", nil), ("ping", nil), ("stats", nil), ("submit", .producer), ("withdraw", .producer),
        ("authorization", .settings), ("settings", .settings), ("provisionalKeep", .settings),
        ("provisionalTurnOff", .settings), ("summarySchedule", .settings), ("focusDefine", .settings),
        ("focusOn", .settings), ("focusOff", .settings), ("mute", .settings), ("snooze", .settings),
        ("opened", .settings), ("badgeClear", .settings), ("registerApp", .admin), ("erase", .admin),
        ("subscribe", .consumer), ("ack", .consumer), ("consumers", .admin), ("deleteConsumer", .admin),
        ("clock", .admin),
    ]

    /// The fields the door reads of each op it admits.
    static let doorFields: [String: Set<String>] = [
        "submit": ["id", "app", "user", "users", "interruptionLevel", "title", "subtitle", "body",
                   "hiddenPreviewsBodyPlaceholder", "threadId", "collapseId", "relevanceScore", "sound", "actions",
                   "communication", "marketing", "deliverAt", "expiresAt", "relevantAt", "data"],
        "withdraw": ["app", "id", "user"],
        "authorization": ["user", "app", "status", "options"],
        "settings": ["user", "app", "alert", "sound", "badge", "lockScreen", "notificationCenter", "showPreviews",
                     "timeSensitive", "delivery", "marketingConsent", "allowNotifications", "attentionBudget"],
        "provisionalKeep": ["user", "app", "delivery"],
        "provisionalTurnOff": ["user", "app"],
        "summarySchedule": ["user", "times", "timeZone"],
        "focusDefine": ["user", "focus", "allowedPeople", "allowedApps", "allowTimeSensitive", "schedule", "timeZone"],
        "focusOn": ["user", "focus", "until"],
        "focusOff": ["user", "focus"],
        "mute": ["user", "app", "until"],
        "snooze": ["user", "app", "id", "until"],
        "opened": ["user", "app", "id"],
        "badgeClear": ["user", "app"],
        "registerApp": ["app", "entitlements"],
        "erase": ["user"],
    ]

    @Test func theRegistryNamesEveryOpOnceInProtocolOrder() {
        #expect(Op.knownNames == Self.roles.map(\.0))
        #expect(Op.allCases.count == Set(Op.knownNames).count)
        for op in Op.allCases { #expect(Op(named: op.name) == op) }
        for other in ["", "Submit", "submit ", "token", "unsubscribe"] { #expect(Op(named: other) == nil) }
        let detail = RequestError.unknownOp("x").detail
        #expect(detail == "Known ops: \(Self.roles.map(\.0).joined(separator: ", ")).")
    }

    @Test func eachOpNeedsTheRoleItNeededBefore() {
        for (name, role) in Self.roles { #expect(Op(named: name)?.requiredRole == role, "\(name)") }
        #expect(Op.submit.requiredRole == ClientSession.submitRole)
    }

    @Test func theDoorAdmitsTheStateChangingOpsWithTheirFields() {
        #expect(Op.admittedNames == Self.roles.map(\.0).filter { Self.doorFields[$0] != nil })
        for op in Op.allCases {
            #expect((op.path == .door) == (Self.doorFields[op.name] != nil), "\(op.name)")
            if let fields = Self.doorFields[op.name] { #expect(op.fields == fields, "\(op.name)") }
        }
        #expect(Op.hello.path == .session && Op.ping.path == .session)
        #expect([Op.stats, .subscribe, .ack, .clock].allSatisfy { $0.path == .service })
    }

    @Test func everyStoredEventKindIsTheEventOfExactlyOneOpOfTheSameName() {
        for op in Op.allCases {
            if let kind = op.entry.stores { #expect(kind.typeName == op.name && EventKind(op.name) == kind) }
        }
        let stored = Op.allCases.compactMap(\.entry.stores)
        #expect(Set(stored) == Set(EventKind.allCases.filter { $0 != .other }) && stored.count == Set(stored).count)
        // Every op the door admits is stored; of the service's, only the manual clock's move.
        #expect(Op.allCases.filter { $0.entry.stores != nil } == Op.allCases.filter { $0.path == .door } + [.clock])
    }

    /// Each op, sent by a grant of each single role: dispatched, answered or refused as its role says.
    @Test func theSessionChecksEachOpsRole() {
        for grantRole in Role.allCases {
            var session = ClientSession(tokens: TokenTable(["t": Grant(name: "g", roles: [grantRole], apps: grantRole == .producer ? ["a"] : nil)]),
                                        serverName: "t")
            _ = session.lineReceived(Array(#"{"op":"hello","token":"t"}"#.utf8))
            for (name, role) in Self.roles {
                let actions = session.lineReceived(Array(#"{"op":"\#(name)","rid":1}"#.utf8))
                let dispatched = actions.compactMap { if case .dispatch(let r) = $0 { r } else { nil } }
                let replies = actions.compactMap { if case .send(let b) = $0 { try? JSONValue.parse(Array(b.dropLast())) } else { nil } }
                if name == "hello" || name == "ping" {
                    #expect(dispatched.isEmpty && replies.count == 1, "\(name)")
                } else if role == nil || role == grantRole {
                    #expect(dispatched.map(\.op) == [Op(named: name)!], "\(name) by \(grantRole)")
                    for r in dispatched { _ = session.replyCompleted(ticket: r.ticket, reply: WireReply.ok(rid: r.rid)) }
                } else {
                    #expect(dispatched.isEmpty && replies.first?["error"]?["code"] == "forbidden", "\(name) by \(grantRole)")
                    #expect(replies.first?["error"]?["detail"] == .string("\(name) needs the \(role!.rawValue) role, which your token does not grant. Ask the operator for a token with it."))
                }
            }
            let unknown = session.lineReceived(Array(#"{"op":"unsubscribe","rid":2}"#.utf8))
            #expect(unknown.contains { if case .send(let b) = $0 { String(decoding: b, as: UTF8.self).contains("\"unknown_op\"") } else { false } })
        }
    }

    @Test func theDoorRefusesEveryOpItDoesNotAdmit() {
        for op in Op.allCases where op.path != .door {
            guard case .rejected(let error) = Engine().admit(op: op.name, request: .object([:]), apps: AppRegistry()) else {
                Issue.record("\(op.name) admitted by the door"); continue
            }
            #expect(error.code == "unknown_op")
            #expect(error.detail == "The ops that change state are: \(Op.admittedNames.joined(separator: ", ")). Check the spelling.")
        }
    }
}
