// The protocol state of one client connection, as a pure state machine: lines in, actions out.

/// One connection's protocol state (SPEC §5). Inputs are facts (`lineReceived`,
/// `replyCompleted`); outputs are actions the runtime performs. Replies leave in request
/// order even when later requests finish first: each request takes a ticket and completed
/// replies wait for the tickets before them.
public struct ClientSession: Sendable {
    /// A request the runtime must carry out; answer it with `replyCompleted(ticket:reply:)`.
    public struct Request: Sendable {
        public var ticket: UInt64
        public var op: String
        public var rid: JSONValue?
        public var body: JSONValue
        public var grant: Grant
    }

    public enum Action: Sendable {
        /// Write these bytes to the client.
        case send([UInt8])
        /// Carry out a request (store, engine, subscription …).
        case dispatch(Request)
        /// Close after sending what is queued; the reason is logged.
        case close(reason: String)
        /// Log at warning level: a request was refused for want of rights (a wrong token, a
        /// role or an app the token lacks). Operators audit these; the token itself is never logged.
        case warn(String)
    }

    public let tokens: TokenTable
    public let serverName: String
    public private(set) var grant: Grant?
    private var nextTicket: UInt64 = 0
    private var nextToSend: UInt64 = 0
    private var finished: [UInt64: [UInt8]] = [:]
    /// Refusals logged on this connection; past `maxLoggedRefusals` they are answered but not logged,
    /// so a client looping on a forbidden request cannot flood the log.
    private var refusalsLogged = 0
    public static let maxLoggedRefusals = 16

    public init(tokens: TokenTable, serverName: String) {
        self.tokens = tokens
        self.serverName = serverName
    }

    /// Requests received and not yet answered (for backpressure).
    public var outstanding: Int { Int(nextTicket - nextToSend) }

    /// A complete line arrived.
    public mutating func lineReceived(_ line: [UInt8]) -> [Action] {
        let ticket = nextTicket
        nextTicket += 1
        let value: JSONValue
        do {
            value = try JSONValue.parse(line)
        } catch {
            return replyCompleted(ticket: ticket, reply: WireReply.error(rid: nil, .malformedLine(error)))
        }
        guard case .object(var body) = value else {
            return replyCompleted(ticket: ticket, reply: WireReply.error(rid: nil, .notAnObject))
        }
        let rid = body.removeValue(forKey: "rid").flatMap { $0.isScalar ? $0 : nil }
        guard let op = body.removeValue(forKey: "op")?.stringValue else {
            return replyCompleted(ticket: ticket, reply: WireReply.error(rid: rid, .missingOp))
        }
        switch op {
        case "ping":
            return replyCompleted(ticket: ticket, reply: WireReply.ok(rid: rid, ["op": "pong"]))
        case "hello":
            guard let granted = tokens.grant(for: body["token"]?.stringValue) else {
                return refusal("refused hello: the token was not recognised (invalid_token)")
                    + replyCompleted(ticket: ticket, reply: WireReply.error(rid: rid, .invalidToken))
            }
            grant = granted
            let apps: JSONValue = granted.apps.map { .array($0.sorted().map { .string($0) }) } ?? .array([.string("*")])
            return replyCompleted(ticket: ticket, reply: WireReply.ok(rid: rid, [
                "op": "hello", "server": .string(serverName),
                "roles": .array(Role.allCases.filter { granted.roles.contains($0) }.map { .string($0.rawValue) }),
                "apps": apps,
            ]))
        default:
            break
        }
        guard let grant else {
            return replyCompleted(ticket: ticket, reply: WireReply.error(rid: rid, .helloRequired))
        }
        if let role = OpAccess.requiredRole[op] {
            guard grant.roles.contains(role) else {
                let app = body["app"]?.stringValue.map { " for app \(JSONValue.string($0).canonicalString)" } ?? ""
                return refusal("refused \(op)\(app) by token \(JSONValue.string(grant.name).canonicalString): it lacks the \(role.rawValue) role (forbidden)")
                    + replyCompleted(ticket: ticket, reply: WireReply.error(rid: rid, .forbidden(op: op, role: role.rawValue)))
            }
            if role == .producer, let app = body["app"]?.stringValue, !grant.mayActFor(app: app) {
                return refusal("refused \(op) for app \(JSONValue.string(app).canonicalString) by token \(JSONValue.string(grant.name).canonicalString): not one of its apps (forbidden_app)")
                    + replyCompleted(ticket: ticket, reply: WireReply.error(rid: rid, .appNotOwned(app)))
            }
        } else if !OpAccess.openOps.contains(op) {
            return replyCompleted(ticket: ticket, reply: WireReply.error(rid: rid, .unknownOp(op)))
        }
        return [.dispatch(Request(ticket: ticket, op: op, rid: rid, body: .object(body), grant: grant))]
    }

    /// The log action for a refusal, until this connection has logged `maxLoggedRefusals` of them.
    private mutating func refusal(_ message: String) -> [Action] {
        refusalsLogged += 1
        if refusalsLogged < Self.maxLoggedRefusals { return [.warn(message)] }
        if refusalsLogged == Self.maxLoggedRefusals {
            return [.warn(message + "; further refusals on this connection are answered but not logged")]
        }
        return []
    }

    /// A request's reply is ready; returns what can be sent now, in request order.
    public mutating func replyCompleted(ticket: UInt64, reply: [UInt8]) -> [Action] {
        if ticket != nextToSend {
            finished[ticket] = reply
            return []
        }
        var out = reply
        nextToSend += 1
        while let next = finished.removeValue(forKey: nextToSend) {
            out += next
            nextToSend += 1
        }
        return [.send(out)]
    }
}

extension JSONValue {
    /// Scalars may serve as `rid`; arrays and objects may not.
    public var isScalar: Bool {
        switch self {
        case .array, .object: return false
        default: return true
        }
    }
}
