// The producer: every op, pipelined on one connection per instance, each call returning its ack; routes by partition.
import Synchronization

/// One connection's requests: the pipeline state behind a lock, driven by the session's thread.
final class ProducerConnection: SessionHandler {
    typealias Pipeline = RequestPipeline<ReplySlot, UnsafeContinuation<Void, Never>?>
    private struct Link {
        var hello: HelloReply?
        var started: UnsafeContinuation<Result<HelloReply, HeraldError>, Never>?
        var reconnects = 0
    }

    let session: WireSession
    /// A connection to a partition's owner: its requests say `"route":"direct"`, so that an
    /// instance that does not own the partition refuses them with `not_owner` instead of forwarding.
    let direct: Bool
    private let pipeline: Mutex<Pipeline>
    private let link = Mutex(Link())

    private init(endpoint: Endpoint, window: Int, direct: Bool) {
        session = WireSession(endpoint: endpoint)
        pipeline = Mutex(Pipeline(window: window))
        self.direct = direct
    }

    static func connect(_ endpoint: Endpoint, window: Int, direct: Bool = false) async throws(HeraldError) -> ProducerConnection {
        let connection = ProducerConnection(endpoint: endpoint, window: window, direct: direct)
        let result = await withUnsafeContinuation { continuation in
            connection.link.withLock { $0.started = continuation }
            connection.session.start(handler: connection)
        }
        _ = try result.get()
        return connection
    }

    var hello: HelloReply { link.withLock { $0.hello! } }
    func helloRefreshed(_ hello: HelloReply) { link.withLock { $0.hello = hello } }
    var reconnects: Int { link.withLock { $0.reconnects } }
    var inFlight: Int { pipeline.withLock { $0.count } }

    /// Queues a request (waiting for room in the window) and returns where its reply will be.
    func send(_ request: some HeraldRequest, into slot: ReplySlot = ReplySlot()) async -> ReplySlot {
        let body = direct ? Self.directMember + request.lineBody() : request.lineBody()
        var actions: [Pipeline.Action] = []
        let queued = pipeline.withLock { p -> Bool in
            guard p.admitsNow else { return false }
            _ = p.requestQueued(body: body, waiter: slot, admission: nil, actions: &actions)
            return true
        }
        if queued {
            perform(actions)
            return slot
        }
        await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
            var actions: [Pipeline.Action] = []
            let admitted = pipeline.withLock { $0.requestQueued(body: body, waiter: slot, admission: continuation, actions: &actions) }
            perform(actions)
            if admitted { continuation.resume() }
        }
        return slot
    }

    private static let directMember = Array(#""route":"direct","#.utf8)

    private func perform(_ actions: [Pipeline.Action]) {
        for action in actions {
            switch action {
            case .wake: session.wake()
            case .settle(let slot, let result): slot.settle(result)
            case .admit(let continuation): continuation?.resume()
            }
        }
    }

    func close() { session.stop() }

    // MARK: SessionHandler (the session's thread)

    func sessionConnected(_ hello: HelloReply, isReconnect: Bool) -> [UInt8] {
        let bytes = pipeline.withLock { $0.connectionEstablished() }
        let started = link.withLock { link -> UnsafeContinuation<Result<HelloReply, HeraldError>, Never>? in
            link.hello = hello
            if isReconnect { link.reconnects += 1 }
            defer { link.started = nil }
            return link.started
        }
        started?.resume(returning: .success(hello))
        return bytes
    }

    func lineReceived(_ line: [UInt8], _ json: [String: HeraldJSON]) -> HeraldError? { nil }
    func deliveryReceived(_ delivery: DeliveryLine) {}

    func replyReceived(_ line: [UInt8], _ head: ReplyHead) -> HeraldError? {
        var actions: [Pipeline.Action] = []
        let unsolicited = pipeline.withLock { $0.replyReceived(line, head, actions: &actions) }
        perform(actions)
        if let unsolicited, unsolicited.isFinal { return unsolicited }
        return nil
    }

    func sessionDisconnected() { pipeline.withLock { $0.connectionLost() } }

    func sessionEnded(_ error: HeraldError) {
        var actions: [Pipeline.Action] = []
        pipeline.withLock { $0.sessionEnded(error, actions: &actions) }
        perform(actions)
        let started = link.withLock { link in defer { link.started = nil }; return link.started }
        started?.resume(returning: .failure(error))
    }

    func takeOutgoing() -> [UInt8] { pipeline.withLock { $0.takeOutbox() } }
    var wantsToRead: Bool { true }
    func ticked(nowMilliseconds: UInt64) {}
    var tickMilliseconds: Int32 { -1 }
}

/// Where a routed request was sent and how often it was sent again.
final class RoutedSend: Sendable {
    private let state: Mutex<(attempts: Int, owner: String?)>
    init(owner: String?) { state = Mutex((0, owner)) }

    /// After a failure: nil when it is the request's answer; else the request goes again, and the
    /// value is the owner's address when that owner could not be reached (.some(nil): not_owner).
    func resends(after error: HeraldError, limit: Int) -> String?? {
        state.withLock { sent -> String?? in
            let unreachable: String?
            switch error.code {
            case "not_owner": unreachable = nil
            case "unreachable", "connect_failed":
                guard let owner = sent.owner else { return nil }
                unreachable = owner
            default: return nil
            }
            guard sent.attempts < limit else { return nil }
            sent.attempts += 1
            return .some(unreachable)
        }
    }

    func sentTo(_ owner: String?) { state.withLock { $0.owner = owner } }
}

/// A producer (and settings, admin) client of Herald: connect once, then call an op method per
/// request. Calls pipeline: `send` returns at once with a `PendingAck` (waiting only while `window`
/// requests are unanswered), the op methods await their ack. After a dropped connection or a
/// server's goodbye it reconnects with backoff and sends again, in order, every request not yet
/// answered (a resent submit is acknowledged as `duplicate` with its original `seq`).
public final class HeraldProducer: Sendable {
    private let endpoint: Endpoint
    private let window: Int
    private let routing: Bool
    private let primary: ProducerConnection
    /// Connections to partitions' owners (hello's `routes`), by address; nil marks an owner that could not be reached.
    private let owners = Mutex<[String: ProducerConnection?]>([:])
    /// The hello in flight that refreshes the routes after a `not_owner`, shared by the requests it refused.
    private let refreshing = Mutex<Task<Void, Never>?>(nil)
    /// How many times a routed request is sent again after `not_owner` before the error is its answer.
    private static let resends = 3

    private init(endpoint: Endpoint, window: Int, routing: Bool, primary: ProducerConnection) {
        self.endpoint = endpoint; self.window = window; self.routing = routing; self.primary = primary
    }

    /// A producer dropped without `close()` closes its connections; what was unanswered fails with `client_closed`.
    deinit {
        primary.close()
        for owner in owners.withLock({ $0.values.compactMap { $0 } }) { owner.close() }
    }

    /// Connects and says hello (with `token`; nil against a server in dev mode). Throws the
    /// refusal (`invalid_token`, …) or the connection's failure; later drops are reconnected.
    /// `routing`: send each user's requests straight to its partition's owner when hello lists routes.
    public static func connect(host: String = "127.0.0.1", port: Int = 7411, token: String? = nil, tls: TLSOptions? = nil,
                               window: Int = 4096, backoff: Backoff = Backoff(), routing: Bool = true) async throws(HeraldError) -> HeraldProducer {
        let endpoint = Endpoint(host: host, port: port, token: token, tls: tls, backoff: backoff)
        let primary = try await ProducerConnection.connect(endpoint, window: window)
        return HeraldProducer(endpoint: endpoint, window: window, routing: routing, primary: primary)
    }

    /// `address` is "host:port".
    public static func connect(address: String, token: String? = nil, tls: TLSOptions? = nil, window: Int = 4096,
                               backoff: Backoff = Backoff(), routing: Bool = true) async throws(HeraldError) -> HeraldProducer {
        let (host, port) = try splitAddress(address)
        return try await connect(host: host, port: port, token: token, tls: tls, window: window, backoff: backoff, routing: routing)
    }

    /// The reply to the latest hello (roles, apps, and the partitions' routes once the server has them).
    public var hello: HelloReply { primary.hello }
    /// How many times the connection to the server first connected to was made again.
    public var reconnects: Int { primary.reconnects }
    /// Requests sent and not yet answered on that connection.
    public var inFlight: Int { primary.inFlight }
    /// The negotiated TLS protocol ("TLSv1.3"), nil on a plain connection.
    public var tlsProtocol: String? { primary.session.tlsProtocol.withLock { $0 } }

    /// Sends a request once the window has room; await the returned ack's `value`.
    public func send(_ request: some HeraldRequest) async -> PendingAck {
        let (connection, owner, routed) = await connection(for: request)
        // With one partition nothing is routed: the fast path, without a redirect.
        guard routed else { return PendingAck(slot: await connection.send(request)) }
        return PendingAck(slot: await connection.send(request, into: routedSlot(request, owner: owner)))
    }

    /// The slot of a routed request: `not_owner` refreshes the routes and sends it again (a few
    /// times at most); an owner that cannot be reached leaves it to the instance connected to.
    private func routedSlot<R: HeraldRequest>(_ request: R, owner: String?) -> ReplySlot {
        let sent = RoutedSend(owner: owner)
        return ReplySlot { [weak self] slot, error in
            guard let self, let unreachable = sent.resends(after: error, limit: Self.resends) else { return false }
            if let unreachable { owners.withLock { if $0[unreachable] != nil { $0[unreachable] = .some(nil) } } }
            Task { [self] in
                if error.code == "not_owner" { await self.refreshRoutesOnce() }
                let (connection, next, _) = await self.connection(for: request)
                sent.sentTo(next)
                _ = await connection.send(request, into: slot)
            }
            return true
        }
    }

    /// Says hello again to the instance first connected to, for the latest routes (hello's reply
    /// replaces `hello`). Requests refused with `not_owner` do it on their own.
    @discardableResult
    public func refreshRoutes() async throws(HeraldError) -> HelloReply {
        let ack = try await PendingAck(slot: primary.send(AnyRequest(op: "hello", members: ["token": .string(endpoint.token ?? "")]))).value
        let hello = HelloReply(reply: ack.raw)
        primary.helloRefreshed(hello)
        // Owners that could not be reached are tried again under new routes.
        owners.withLock { $0 = $0.filter { $0.value != nil } }
        return hello
    }

    /// Routes as a hello would give them (the tests' stand-in for a server of several partitions).
    func helloReplaced(_ hello: HelloReply) {
        primary.helloRefreshed(hello)
        owners.withLock { $0 = $0.filter { $0.value != nil } }
    }

    /// Owner addresses with a connection (true) or marked unreachable (false).
    var ownerAddresses: [String: Bool] { owners.withLock { $0.mapValues { $0 != nil } } }

    private func refreshRoutesOnce() async {
        let task = refreshing.withLock { current -> Task<Void, Never> in
            if let current { return current }
            let task = Task { [self] in
                _ = try? await refreshRoutes()
                refreshing.withLock { $0 = nil }
            }
            current = task
            return task
        }
        await task.value
    }

    /// Sends a request and waits for its ack (throws the server's refusal as a `HeraldError`).
    @discardableResult
    public func request(_ request: some HeraldRequest) async throws(HeraldError) -> Ack {
        try await send(request).value
    }

    @discardableResult
    public func submit(_ submit: Submit) async throws(HeraldError) -> Ack { try await request(submit) }
    @discardableResult
    public func withdraw(_ withdraw: Withdraw) async throws(HeraldError) -> Ack { try await request(withdraw) }
    @discardableResult
    public func authorization(_ r: Authorization) async throws(HeraldError) -> Ack { try await request(r) }
    @discardableResult
    public func settings(_ r: Settings) async throws(HeraldError) -> Ack { try await request(r) }
    @discardableResult
    public func provisionalKeep(_ r: ProvisionalKeep) async throws(HeraldError) -> Ack { try await request(r) }
    @discardableResult
    public func provisionalTurnOff(_ r: ProvisionalTurnOff) async throws(HeraldError) -> Ack { try await request(r) }
    @discardableResult
    public func summarySchedule(_ r: SummarySchedule) async throws(HeraldError) -> Ack { try await request(r) }
    @discardableResult
    public func focusDefine(_ r: FocusDefine) async throws(HeraldError) -> Ack { try await request(r) }
    @discardableResult
    public func focusOn(_ r: FocusOn) async throws(HeraldError) -> Ack { try await request(r) }
    @discardableResult
    public func focusOff(_ r: FocusOff) async throws(HeraldError) -> Ack { try await request(r) }
    @discardableResult
    public func mute(_ r: Mute) async throws(HeraldError) -> Ack { try await request(r) }
    @discardableResult
    public func snooze(_ r: Snooze) async throws(HeraldError) -> Ack { try await request(r) }
    @discardableResult
    public func opened(_ r: Opened) async throws(HeraldError) -> Ack { try await request(r) }
    @discardableResult
    public func badgeClear(_ r: BadgeClear) async throws(HeraldError) -> Ack { try await request(r) }
    @discardableResult
    public func registerApp(_ app: String, entitlements: [Entitlement] = []) async throws(HeraldError) -> Ack {
        try await request(RegisterApp(app: app, entitlements: entitlements))
    }
    /// Manual-clock mode: fires every timer due up to `advanceTo` (RFC 3339), then replies (`raw["now"]`).
    @discardableResult
    public func clock(advanceTo: String) async throws(HeraldError) -> Ack { try await request(Clock(advanceTo: advanceTo)) }
    /// Liveness: the `pong` reply's members.
    public func ping() async throws(HeraldError) -> [String: HeraldJSON] { try await request(AnyRequest(op: "ping")).raw }
    /// The server's counters.
    public func stats() async throws(HeraldError) -> [String: HeraldJSON] { try await request(AnyRequest(op: "stats")).raw }
    /// Admin: every durable consumer, in the reply's `raw["consumers"]` (each with its partitions'
    /// acknowledged cursor and head, lag, filter, last ack and live `members`), and the live
    /// ephemeral streams in `raw["ephemeral"]`.
    public func consumers() async throws(HeraldError) -> Ack { try await request(AnyRequest(op: "consumers")) }
    /// Admin: deletes a durable consumer: its live connections are closed (`consumer_deleted`), its
    /// cursor removed. The reply's `raw` holds `acked` (the cursor it had) and `closedConnections`;
    /// an unknown name throws `unknown_consumer`.
    @discardableResult
    public func deleteConsumer(_ consumer: String) async throws(HeraldError) -> Ack {
        try await request(AnyRequest(op: "deleteConsumer", members: ["consumer": .string(consumer)]))
    }
    /// Admin: erases a user's notification content (their content keys are deleted); `seq` is the
    /// erasure event's. The user's later notifications are stored under a new key.
    @discardableResult
    public func erase(user: String) async throws(HeraldError) -> Ack {
        try await request(AnyRequest(op: "erase", members: ["user": .string(user)]))
    }

    /// A consumer on a connection of its own (one stream per connection), to the same server with the same token.
    public func subscribe(consumer: String, from start: SubscribeStart = .committed, filter: DeliveryFilter? = nil,
                          ackEvery: Int = 256, ackIntervalMilliseconds: Int = 200) async throws(HeraldError) -> HeraldConsumer {
        try await HeraldConsumer.subscribe(host: endpoint.host, port: endpoint.port, token: endpoint.token, tls: endpoint.tls,
                                           consumer: consumer, from: start, filter: filter, ackEvery: ackEvery,
                                           ackIntervalMilliseconds: ackIntervalMilliseconds, backoff: endpoint.backoff)
    }

    /// Waits for every request sent to be answered (or to fail), then closes the connections.
    public func close() async {
        let connections = [primary] + owners.withLock { $0.values.compactMap { $0 } }
        for c in connections {
            // Replies come in request order: once a ping sent last is answered, so is everything before it.
            _ = await c.send(AnyRequest(op: "ping")).result
            c.close()
        }
    }

    /// The connection for a request: its partition's owner when hello lists routes (with the
    /// owner's address), else the first one (nil: the instance connected to forwards); `routed`
    /// when the request belongs to a partition of several (a `not_owner` then sends it again).
    private func connection(for request: some HeraldRequest) async -> (ProducerConnection, owner: String?, routed: Bool) {
        guard routing, let user = request.routingUser else { return (primary, nil, false) }
        let hello = primary.hello
        // Only a partition function this client knows can pick the owner; otherwise the instance forwards.
        guard hello.partitions > 1 else { return (primary, nil, false) }
        guard !hello.routes.isEmpty, hello.hash == nil || hello.hash == "fnv1a64" else { return (primary, nil, true) }
        let partition = Partitioning.partition(ofUser: user, partitions: hello.partitions)
        guard let route = hello.routes.first(where: { $0.partition == partition }), route.address != endpoint.address else { return (primary, nil, true) }
        if let known = owners.withLock({ $0[route.address] }) { return known.map { ($0, route.address, true) } ?? (primary, nil, true) }
        var owner: ProducerConnection?
        if let (host, port) = try? Self.splitAddress(route.address) {
            // An owner that drops is tried a few times only: its requests then go to the instance connected to.
            let backoff = Backoff(initialMilliseconds: endpoint.backoff.initialMilliseconds,
                                  maximumMilliseconds: endpoint.backoff.maximumMilliseconds, attempts: 3)
            owner = try? await ProducerConnection.connect(Endpoint(host: host, port: port, token: endpoint.token, tls: endpoint.tls,
                                                                   backoff: backoff), window: window, direct: true)
        }
        let chosen = owners.withLock { owners -> ProducerConnection? in
            if let existing = owners[route.address] { return existing }
            owners[route.address] = .some(owner)
            return owner
        }
        if let owner, chosen !== owner { owner.close() }
        return chosen.map { ($0, route.address, true) } ?? (primary, nil, true)
    }

    static func splitAddress(_ address: String) throws(HeraldError) -> (String, Int) {
        guard let colon = address.lastIndex(of: ":"), let port = Int(address[address.index(after: colon)...]), port > 0, port < 65536 else {
            throw HeraldError(code: "invalid_address", title: "“\(address)” is not HOST:PORT", detail: "Give the server's address as host:port, e.g. 127.0.0.1:7411.")
        }
        var host = String(address[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return (host.isEmpty ? "127.0.0.1" : host, port)
    }
}
