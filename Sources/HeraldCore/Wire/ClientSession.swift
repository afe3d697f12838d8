// The protocol state of one client connection, as a pure state machine: lines in, actions out.
import DequeModule

/// One connection's protocol state (SPEC §5). Inputs are facts (`lineReceived`,
/// `replyCompleted`); outputs are actions the runtime performs. Replies leave in request
/// order even when later requests finish first: each request takes a ticket and completed
/// replies wait for the tickets before them.
public struct ClientSession: Sendable {
    /// A request the runtime must carry out; answer it with `replyCompleted(ticket:reply:)`.
    /// It carries no grant: the session checked the grant before dispatching it (and a request is
    /// copied several times on its way; a grant is four reference-counted values).
    public struct Request: Sendable {
        public var ticket: UInt64
        public var op: Op
        public var rid: JSONValue?
        /// The members other than `op` and `rid`; `.null` when `submitLine` holds the request.
        public var body: JSONValue
        /// A plain submit read straight from its line (`SubmitLine`), else nil.
        public var submitLine: SubmitLine? = nil
        /// The line as received, kept when the session forwards (`forwardsLines`).
        public var line: [UInt8]? = nil
    }

    public enum Action: Sendable {
        /// Write these bytes to the client.
        case send([UInt8])
        /// Carry out a request (store, engine, subscription …).
        case dispatch(Request)
        /// Close after sending what is queued; the reason is logged.
        case close(reason: String)
        /// Read nothing more; once every request read so far is answered, send `finalLine` (if
        /// any) and close. Requests already read may be committed: their replies are owed
        /// (SPEC §5), and the last word comes after them, in order.
        case closeAfterReplies(finalLine: [UInt8]?, reason: String)
        /// Log at warning level: a request was refused for want of rights (a wrong token, a
        /// role or an app the token lacks). Operators audit these; the token itself is never logged.
        case warn(String)
    }

    /// What a hello proved, kept so a reload of the tokens file can re-check the grant.
    enum Credential: Sendable {
        case token(TokenDigest), certificate([String]), devMode
    }

    public private(set) var tokens: TokenTable
    public let serverName: String
    public private(set) var grant: Grant? {
        didSet {
            isProducer = grant?.roles.contains(Self.submitRole) == true
            producerApps = isProducer ? grant?.apps : nil
        }
    }
    /// The grant's producer rights, decided once per hello instead of once per line: on every
    /// submit, checking `Set<Role>` would cost a hash, and copying the optional grant to call
    /// `mayActFor` would retain and release its sets — atomics on the loop's hottest path.
    private var isProducer = false
    /// The apps a producer may act for (`Grant.apps`: nil means any app).
    private var producerApps: Set<String>?
    private var credential: Credential?
    /// Names of the client's verified TLS certificate (CN, SANs); empty without one.
    public private(set) var certificateNames: [String] = []
    private var nextTicket: UInt64 = 0
    /// The app of the last plain submit read, handed to the next one's reading (`SubmitLine.read`):
    /// a producer's submits mostly name one app, and its id is then shared, not rebuilt.
    private var lastSubmitApp: String?
    private var nextToSend: UInt64 = 0
    private var finished: [UInt64: [UInt8]] = [:]
    /// Refusals logged on this connection; past `maxLoggedRefusals` they are answered but not logged,
    /// so a client looping on a forbidden request cannot flood the log.
    private var refusalsLogged = 0
    public static let maxLoggedRefusals = 16
    /// Hellos refused on this connection (summed in `stats` as `hellosRefused`). At
    /// `maxRefusedHellos` the connection is closed: otherwise one connection could guess tens of
    /// thousands of tokens a second, unseen once its refusals are no longer logged.
    public private(set) var refusedHellos = 0
    public static let maxRefusedHellos = 10

    /// What the hello reply tells of the deployment (SPEC §9): `instance`, `partitions`, `hash`
    /// and `routes`, set by the service when the connection opens.
    public var topology: [String: JSONValue] = [:]
    /// A router's session (SPEC §9, routing): every request is parsed (no plain-submit reading)
    /// and dispatched with its line, which is forwarded as received to the partition's owner.
    public var forwardsLines = false

    public init(tokens: TokenTable, serverName: String) {
        self.tokens = tokens
        self.serverName = serverName
    }

    /// Requests received and not yet answered (for backpressure).
    public var outstanding: Int { Int(nextTicket - nextToSend) }

    /// Whether the reply to `ticket` has been handed to the socket (every earlier one too).
    public func replySent(_ ticket: UInt64) -> Bool { ticket < nextToSend }

    /// Makes `app` (equal to the last plain submit's app, e.g. the app registry's string for it)
    /// the string the next submits share (`SubmitLine.read(_:knownApp:)`).
    public mutating func shareApp(_ app: String) {
        if lastSubmitApp == app { lastSubmitApp = app }
    }

    /// A complete line arrived.
    public mutating func lineReceived(_ line: [UInt8]) -> [Action] {
        line.withUnsafeBytes { lineReceived($0) }
    }

    /// A complete line arrived, as bytes valid during the call (`LineFramer.feedLines`).
    public mutating func lineReceived(_ line: UnsafeRawBufferPointer) -> [Action] {
        var actions = Deque<Action>()
        lineReceived(line, into: &actions)
        return Array(actions)
    }

    /// `lineReceived`, appending its actions to `actions`: the runtime keeps one queue, with its
    /// capacity, per connection and collects a whole chunk's actions in it (an array per line,
    /// appended to the chunk's, would cost an allocation and a copy a line).
    public mutating func lineReceived(_ line: UnsafeRawBufferPointer, into actions: inout Deque<Action>) {
        let ticket = nextTicket
        nextTicket += 1
        // The common case first: a plain submit from a producer for one of its apps, read without
        // a JSON tree. Anything else — including every refusal — takes the general path below.
        if isProducer, !forwardsLines, let submit = SubmitLine.read(line, knownApp: lastSubmitApp),
           producerApps?.contains(submit.app) ?? true {
            lastSubmitApp = submit.app
            actions.append(.dispatch(Request(ticket: ticket, op: .submit, rid: submit.rid, body: .null, submitLine: submit)))
            return
        }
        for action in generalLine(line, ticket: ticket) { actions.append(action) }
    }

    /// Every line but a plain submit: parsed into a JSON tree, then dispatched by its op.
    private mutating func generalLine(_ line: UnsafeRawBufferPointer, ticket: UInt64) -> [Action] {
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
        let known = Op(named: op)
        switch known {
        case .ping?:
            return replyCompleted(ticket: ticket, reply: WireReply.ok(rid: rid, ["op": "pong"]))
        case .hello?:
            // A client certificate that maps to a grant decides; a token is not looked at then.
            let presented: Credential
            if tokens.isDevMode {
                presented = .devMode
            } else if !certificateNames.isEmpty, tokens.grant(forCertificateNames: certificateNames) != nil {
                presented = .certificate(certificateNames)
            } else if let token = body["token"]?.stringValue {
                presented = .token(TokenDigest(token: token))
            } else if let other = body["token"], other != .null {
                return helloRefused(ticket: ticket, rid: rid, "the token was \(other.typeName), not a string", .tokenNotAString(other.typeName))
            } else {
                return helloRefused(ticket: ticket, rid: rid, "no token was given", .tokenMissing)
            }
            guard let granted = Self.grant(for: presented, in: tokens) else {
                return helloRefused(ticket: ticket, rid: rid, "the token was not recognised", .invalidToken)
            }
            grant = granted
            credential = presented
            let apps: JSONValue = granted.apps.map { .array($0.sorted().map { .string($0) }) } ?? .array([.string("*")])
            var fields: [String: JSONValue] = [
                "op": "hello", "server": .string(serverName),
                "roles": .array(Role.allCases.filter { granted.roles.contains($0) }.map { .string($0.rawValue) }),
                "apps": apps,
            ]
            fields.merge(topology) { mine, _ in mine }
            return replyCompleted(ticket: ticket, reply: WireReply.ok(rid: rid, fields))
        default:
            break
        }
        guard let grant else {
            return replyCompleted(ticket: ticket, reply: WireReply.error(rid: rid, .helloRequired))
        }
        guard let known else {
            return replyCompleted(ticket: ticket, reply: WireReply.error(rid: rid, .unknownOp(op)))
        }
        if let role = known.requiredRole {
            guard grant.roles.contains(role) else {
                let app = body["app"]?.stringValue.map { " for app \(JSONValue.string($0).canonicalString)" } ?? ""
                return refusal("refused \(op)\(app) by token \(JSONValue.string(grant.name).canonicalString): it lacks the \(role.rawValue) role (forbidden)")
                    + replyCompleted(ticket: ticket, reply: WireReply.error(rid: rid, .forbidden(op: op, role: role.rawValue)))
            }
            if role == .producer, let app = body["app"]?.stringValue, !grant.mayActFor(app: app) {
                return refusal("refused \(op) for app \(JSONValue.string(app).canonicalString) by token \(JSONValue.string(grant.name).canonicalString): not one of its apps (forbidden_app)")
                    + replyCompleted(ticket: ticket, reply: WireReply.error(rid: rid, .appNotOwned(app)))
            }
            if role == .consumer, let name = body["consumer"]?.stringValue, !grant.mayConsumeAs(name) {
                return refusal("refused \(op) as consumer \(JSONValue.string(name).canonicalString) by token \(JSONValue.string(grant.name).canonicalString): not one of its consumers (forbidden_consumer)")
                    + replyCompleted(ticket: ticket, reply: WireReply.error(rid: rid, .consumerNotOwned(name)))
            }
        }
        return [.dispatch(Request(ticket: ticket, op: known, rid: rid, body: .object(body), line: forwardsLines ? Array(line) : nil))]
    }

    /// The TLS handshake verified a client certificate with these names (CN, DNS and URI SANs).
    public mutating func peerCertificateVerified(names: [String]) {
        certificateNames = names
    }

    /// The role a submit needs (`Op.submit.requiredRole`, without the look-up).
    static let submitRole = Role.producer

    /// The tokens file was reloaded. A connection whose credential now maps to the same grant
    /// carries on; one whose grant changed or was removed is told so and closed (it may
    /// reconnect and hello again). Connections without a hello yet simply use the new table.
    public mutating func tokensReloaded(_ table: TokenTable) -> [Action] {
        tokens = table
        guard let grant, let credential else { return [] }
        if Self.grant(for: credential, in: table) == grant { return [] }
        self.grant = nil
        self.credential = nil
        return [.closeAfterReplies(finalLine: WireReply.error(rid: nil, .grantRevoked),
                                   reason: "its grant (\(grant.name)) was changed or removed by a reload of the tokens file")]
    }

    private static func grant(for credential: Credential, in table: TokenTable) -> Grant? {
        switch credential {
        case .devMode: return table.isDevMode ? .everything : nil
        case .token(let digest): return table.isDevMode ? nil : table.grant(for: digest)
        case .certificate(let names): return table.grant(forCertificateNames: names)
        }
    }

    /// A refused hello: logged, answered, and at the `maxRefusedHellos`th the connection closes.
    private mutating func helloRefused(ticket: UInt64, rid: JSONValue?, _ why: String, _ error: RequestError) -> [Action] {
        refusedHellos += 1
        guard refusedHellos >= Self.maxRefusedHellos else {
            return refusal("refused hello: \(why) (invalid_token)") + replyCompleted(ticket: ticket, reply: WireReply.error(rid: rid, error))
        }
        let reason = "\(refusedHellos) hellos refused on this connection (too_many_refused_hellos)"
        return [.warn("refused hello: \(why) (invalid_token); closing: \(reason)")]
            + replyCompleted(ticket: ticket, reply: WireReply.error(rid: rid, error))
            + [.closeAfterReplies(finalLine: WireReply.error(rid: nil, .tooManyRefusedHellos), reason: reason)]
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
        releaseReply(ticket: ticket, reply: reply).map { [.send($0)] } ?? []
    }

    /// True, and the reply counted as sent, when `ticket`'s reply may go out now as it is: it is
    /// the next one and no later reply is held. Otherwise false, nothing changed (the caller
    /// then hands the bytes to `releaseReply`). For replies written in place (no array made).
    public mutating func releaseReplyInPlace(ticket: UInt64) -> Bool {
        guard ticket == nextToSend, finished.isEmpty else { return false }
        nextToSend += 1
        return true
    }

    /// `replyCompleted` without an action array, for the runtime's path of every reply: the bytes
    /// to send now (this reply and the finished ones it releases, in request order), or nil
    /// while an earlier reply is still outstanding.
    public mutating func releaseReply(ticket: UInt64, reply: [UInt8]) -> [UInt8]? {
        if ticket != nextToSend {
            finished[ticket] = reply
            return nil
        }
        nextToSend += 1
        if finished.isEmpty { return reply }  // in order, nothing held: no look-up
        var out = reply
        while let next = finished.removeValue(forKey: nextToSend) {
            out += next
            nextToSend += 1
        }
        return out
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
