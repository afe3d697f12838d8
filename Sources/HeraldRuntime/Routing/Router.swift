// A cluster member's front door: accepts every client, forwards each request to its partition's owner, relays the replies.
import CLibEvent
import DequeModule
import Glibc
import HeraldCore

/// The door of `herald serve --instance` (SPEC §9, routing). Clients connect here; the session
/// checks hello, roles and apps as on a single instance; each request then goes, as received, to
/// the owner of its user's partition — a partition service of this process (on loopback, with the
/// member's internal token) or another instance (with the peer token, marked
/// `"route":{"partition":p}` so it is served there or refused, never forwarded twice). Replies come
/// back in each connection's request order (the connection orders them by ticket). A fan-out
/// across partitions is split and answered once, after every partition answered (`ReplyMerge`).
/// A client's request whose partition has no reachable owner waits (`parked`) until the leases name
/// one, or until `parkMilliseconds`; what becomes of each request is `ForwardedRequest`'s to decide.
final class Router: ConnectionDelegate {
    struct Settings {
        var host = "127.0.0.1"
        var port = 0
        var tokens = TokenTable()
        var tls: TLSContext?
        var serverName = HeraldVersion.serverName
        var maxLineBytes = 65_536
        var maxConnections = 10_000
        var limits = ClientConnection.Limits()
        var instance = ""
        /// The token this member's partition services accept.
        var internalToken = ""
        /// The token other instances accept from this one (nil: they run in dev mode).
        var peerToken: String?
        /// How long a request waits for its partition to have an owner before it is refused.
        var parkMilliseconds: Int64 = 30_000
        /// The experiments' negative control (`HERALD_UNSAFE_ROUTER_ACKS_FOR_TESTING=N`): every Nth
        /// submit is acknowledged by the router itself and never forwarded. Never in production.
        var acknowledgeEveryNthUnsentForTesting = 0
    }

    let loop: EventLoop
    /// Its tokens and TLS context change on SIGHUP (`tokensReloaded`, `certificateReloaded`).
    private(set) var settings: Settings
    var log: (String) -> Void
    var partitioning: Partitioning
    /// Each partition's owner, as the member last read the leases.
    var owners: Owners
    /// The partitions this member's services serve, and where (loopback address).
    var local: [Int: String] = [:]
    /// The advertised address of this instance (its routes name it for the partitions it owns).
    var advertised: String
    /// Asked for when a request found no owner: the member reads the leases again at once.
    var wantsRoutes: (() -> Void)?

    private(set) var listener: Listener?
    private var connections = ConnectionTable()
    private var reaper: LoopEvent?
    private let delegateRef = ConnectionDelegateRef()
    /// Pipelined request links, one per owner address.
    private var links: [String: UpstreamLink] = [:]
    /// Subscriptions by client connection id.
    private var streams: [UInt64: RouterStream] = [:]
    /// Numbers the consumer group members that subscribe here.
    private var memberSerial: UInt64 = 0
    /// Requests waiting for their partition's owner.
    private var parked: Deque<Parked> = []
    private var parkTimer: LoopEvent?
    private let unretained = Unretained<Router>()
    private(set) var forwarded = 0
    private(set) var forwardedRemote = 0
    private(set) var draining = false
    private var unsentForTesting = 0

    struct Parked {
        var request: ForwardedRequest
        var line: [UInt8]
        var handler: UpstreamLink.ReplyHandler
    }

    init(loop: EventLoop, settings: Settings, partitioning: Partitioning, advertised: String, log: @escaping (String) -> Void) {
        self.loop = loop
        self.settings = settings
        self.partitioning = partitioning
        self.owners = Owners(partitions: partitioning.count)
        self.advertised = advertised
        self.log = log
        unretained.object = self
        delegateRef.delegate = self
        connections.limit = settings.maxConnections
    }

    deinit {
        unretained.object = nil
        delegateRef.delegate = nil
    }

    /// Binds the listener; returns the port.
    func listen() throws -> Int {
        let listener = try Listener(loop: loop, host: settings.host, port: settings.port, onAccept: { [unretained] fd in
            unretained.object?.accept(fd)
        }, onAcceptError: { [unretained] message in unretained.object?.log("warning: \(message)") })
        self.listener = listener
        reaper = loop.timer { [unretained] in unretained.object?.connections.freeClosed() }
        parkTimer = loop.timer { [unretained] in unretained.object?.retryParked() }
        return listener.port
    }

    // MARK: Connections

    private func accept(_ fd: Int32) {
        if draining || connections.isFull {
            if settings.tls == nil {
                let line = WireReply.error(rid: nil, .busy)
                _ = line.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            }
            close(fd)
            return
        }
        var session = ClientSession(tokens: settings.tokens, serverName: settings.serverName)
        session.forwardsLines = true
        session.topology = topology()
        guard let connection = ClientConnection(id: connections.takeId(), fd: fd, loop: loop, session: session,
                                                maxLineBytes: settings.maxLineBytes, delegate: delegateRef, tls: settings.tls) else {
            if fcntl(fd, F_GETFD) != -1 { close(fd) }
            return
        }
        connection.startDeadlines(settings.limits)
        connections.accepted(connection)
    }

    /// What `hello` tells of the deployment: this instance, P, the hash and each partition's owner.
    func topology() -> [String: JSONValue] {
        ["instance": .string(settings.instance), "partitions": .int(Int64(partitioning.count)),
         "hash": .string(Partitioning.hashName), "routes": owners.routes]
    }

    func connectionClosing(_ connection: ClientConnection, reason: String) {
        if let stream = streams.removeValue(forKey: connection.id) { stream.close() }
    }

    func connectionWarning(_ connection: ClientConnection, _ message: String) { log("warning: \(message)") }

    func connectionClosed(_ connection: ClientConnection) {
        connections.closed(connection)
        reaper?.arm(afterMilliseconds: 0)
    }

    var openConnections: Int { connections.count }
    /// Requests waiting for their partition to have an owner.
    var parkedCount: Int { parked.count }

    /// SIGHUP read the tokens file again: later hellos are judged by `table`, and each open
    /// connection whose grant it no longer gives is told `grant_revoked` and closed. Returns how
    /// many lost their grant.
    func tokensReloaded(_ table: TokenTable) -> Int {
        settings.tokens = table
        return connections.tokensReloaded(table)
    }

    /// SIGHUP read the certificate and key again: later connections use `context`; open ones
    /// keep the session they negotiated.
    func certificateReloaded(_ context: TLSContext) { settings.tls = context }

    // MARK: Requests

    func handle(_ request: ClientSession.Request, from connection: ClientConnection) {
        let ticket = request.ticket
        let reply: UpstreamLink.ReplyHandler = { [connectionRef = connection.unretained] line in
            guard let c = connectionRef.object else { return }
            var bytes = line
            bytes.append(0x0A)
            c.complete(ticket: ticket, reply: bytes)
        }
        guard var line = request.line else { preconditionFailure("a router's session keeps every line") }
        line.append(0x0A)
        let direct = request.body["route"]?.stringValue == "direct"
        // From another instance: for one partition, served by this instance's service of it or
        // refused (never forwarded again, never parked here: see `ForwardedRequest`).
        if let p = request.body["route"]?["partition"]?.intValue.map(Int.init), request.op != .subscribe {
            if local[p] != nil, request.op == .ack, let stream = streams[connection.id] {
                stream.ack(line, partition: p, reply)
            } else {
                forward(line, to: p, origin: .peer, reply)
            }
            return
        }
        switch RequestRoute.of(request.op, body: request.body, partitioning: partitioning) {
        case .router:
            reply(Self.bytes(WireReply.ok(rid: request.rid, stats())))
        case .partition(let p):
            if settings.acknowledgeEveryNthUnsentForTesting > 0, request.op == .submit {
                unsentForTesting += 1
                if unsentForTesting % settings.acknowledgeEveryNthUnsentForTesting == 0 {
                    reply(Self.bytes(WireReply.ok(rid: request.rid, ["partition": .int(Int64(p)), "seq": .int(0), "warnings": .array([])])))
                    return
                }
            }
            if direct, local[p] == nil {
                reply(Self.bytes(notOwner(partition: p, rid: request.rid)))
                return
            }
            forward(line, to: p, reply)
        case .split(let parts):
            guard case .object(var body) = request.body else { return }
            body["op"] = .string(request.op.name)
            var lines: [(Int, [UInt8])] = []
            for part in parts {
                body["users"] = .array(part.users.map(JSONValue.string))
                lines.append((part.partition, WireReply.line(.object(body))))
            }
            gather(op: request.op, rid: request.rid, lines, reply)
        case .everyPartition:
            gather(op: request.op, rid: request.rid, partitioning.all.map { ($0, line) }, reply)
        case .ack(let p):
            guard let stream = streams[connection.id] else {
                // Not subscribed here: the partition's service answers (it knows no such stream).
                forward(line, to: p, reply)
                return
            }
            stream.ack(line, partition: p, reply)
        case .subscribe:
            subscribe(request, line: line, connection: connection, reply)
        }
    }

    /// Sends `line` to partition `p`'s owner and `handler` its reply (`origin`: who sent it; see
    /// `ForwardedRequest` for where each may go and what a refusal or a lost link does to it).
    func forward(_ line: [UInt8], to p: Int, origin: ForwardedRequest.Origin = .client, _ handler: @escaping UpstreamLink.ReplyHandler) {
        let request = ForwardedRequest(origin: origin, partition: p, now: ClientConnection.monotonicMilliseconds(),
                                       parkLimitMilliseconds: settings.parkMilliseconds)
        route(Parked(request: request, line: line, handler: handler))
    }

    /// Looks the owner of the item's partition up and does what its request's machine says.
    private func route(_ item: Parked) {
        var sent = item
        let p = item.request.partition
        let found = link(for: p, origin: item.request.origin)
        let owner: ForwardedRequest.Owner = found.map { $0.remote ? .otherInstance : .localService } ?? .unknown
        let action = sent.request.ownerLookedUp(owner, now: ClientConnection.monotonicMilliseconds())
        guard case .send = action, let (link, remote) = found else {
            perform(action, sent)
            return
        }
        forwarded += 1
        if remote { forwardedRemote += 1 }
        let out = remote ? Self.directed(sent.line, partition: p) : sent.line
        link.send(out, tag: p, request: sent.request) { [unretained, sent] answer in
            var answered = sent
            let next = answered.request.answerReceived(notOwner: Self.isNotOwner(answer), now: ClientConnection.monotonicMilliseconds())
            if next == .relay { return sent.handler(answer) }
            if let self = unretained.object { self.perform(next, answered) } else { sent.handler(answer) }
        }
    }

    /// Carries out a request's action other than sending it (`route` sends, the link's reply relays).
    private func perform(_ action: ForwardedRequest.Action, _ item: Parked) {
        let p = item.request.partition
        switch action {
        case .send:
            route(item)
        case .relay:
            preconditionFailure("only an owner's answer is relayed, where it is received")
        case .park:
            // An owner that lost the partition meanwhile (fenced, or not the owner any more), or
            // none known: nothing was stored; it waits for the new owner.
            parked.append(item)
            parkTimer?.arm(afterMilliseconds: 100)
            wantsRoutes?()
        case .refuseNotOwner:
            item.handler(Self.bytes(notOwner(partition: p, rid: Self.rid(of: item.line))))
        case .refuseUnavailable(let waited):
            item.handler(Self.bytes(WireReply.error(rid: Self.rid(of: item.line), Self.unavailable(p, waited: waited))))
        }
    }

    /// Sends each partition its line; one merged reply once all answered.
    private func gather(op: Op, rid: JSONValue?, _ lines: [(Int, [UInt8])], _ reply: @escaping UpstreamLink.ReplyHandler) {
        let gathering = Gathering(count: lines.count)
        for (p, line) in lines {
            forward(line, to: p) { answer in
                gathering.replies.append((p, (try? JSONValue.parse(answer)) ?? .object([:])))
                guard gathering.replies.count == gathering.count else { return }
                let sorted = gathering.replies.sorted { $0.partition < $1.partition }
                reply(Self.bytes(WireReply.line(ReplyMerge.merge(op: op, rid: rid, sorted))))
            }
        }
    }

    final class Gathering {
        let count: Int
        var replies: [(partition: Int, reply: JSONValue)] = []
        init(count: Int) { self.count = count }
    }

    /// The request link to partition `p`'s owner (made on first use), and whether it is another
    /// instance; nil while `p` has no owner. A peer's request goes only to this member's service.
    private func link(for p: Int, origin: ForwardedRequest.Origin) -> (link: UpstreamLink, remote: Bool)? {
        let address: String
        let token: String?
        let remote: Bool
        if let mine = local[p], links[mine].map({ !$0.saidGoodbye }) ?? true {
            address = mine
            token = settings.internalToken
            remote = false
        } else if origin == .client, let owner = owners[p], owner.address != advertised {
            address = owner.address
            token = settings.peerToken
            remote = true
        } else {
            return nil
        }
        if let link = links[address], !link.isClosed, !link.saidGoodbye { return (link, remote) }
        let link = UpstreamLink(loop: loop, address: address, token: token)
        link.onLost = { [unretained] lost, why in unretained.object?.linkLost(address, lost, why) }
        links[address] = link
        return (link, remote)
    }

    /// A link ended: what it had not answered waits for the partition's (new) owner, or, sent by
    /// another instance, is refused to it (`ForwardedRequest.linkLost`).
    private func linkLost(_ address: String, _ lost: [UpstreamLink.Pending], _ why: String) {
        if links[address]?.isClosed == true || links[address]?.saidGoodbye == true { links[address] = nil }
        // A local service that said goodbye or stopped answering is going away (handed over, or its
        // lease lost): its partitions' owners come from the leases from now on.
        for (p, local) in local where local == address { self.local[p] = nil }
        wantsRoutes?()
        guard !lost.isEmpty else { return }
        log("notice: \(lost.count) request(s) to \(address) unanswered (\(why)); sent again to the partition's owner or refused to the instance that sent it")
        let now = ClientConnection.monotonicMilliseconds()
        for l in lost {
            var request = l.request ?? ForwardedRequest(origin: .client, partition: l.tag, now: now, parkLimitMilliseconds: settings.parkMilliseconds)
            let action = request.linkLost(now: now)
            perform(action, Parked(request: request, line: Self.undirected(l.line), handler: l.handler))
        }
    }

    /// Looks the owners of parked requests up again: those with one are sent, those that waited
    /// too long are refused, the others wait on.
    func retryParked() {
        guard !parked.isEmpty else { return }
        let waiting = parked
        parked.removeAll()
        for item in waiting { route(item) }
    }

    /// The member read the leases: new owners take the parked requests at once.
    func ownersChanged(_ new: Owners) {
        let changed = new != owners
        owners = new
        if changed {
            for c in connections.open.values { c.topologyChanged(topology()) }
        }
        if !parked.isEmpty { retryParked() }
        for stream in streams.values { stream.resubscribeMissing() }
    }

    // MARK: Subscriptions

    private func subscribe(_ request: ClientSession.Request, line: [UInt8], connection: ClientConnection,
                           _ reply: @escaping UpstreamLink.ReplyHandler) {
        streams[connection.id]?.close()
        var wanted = partitioning.all.map { $0 }
        if let only = request.body["partitions"]?.arrayValue {
            let set = Set(only.compactMap(\.intValue).map(Int.init))
            wanted = wanted.filter(set.contains)
        }
        // A subscription forwarded by another member's router keeps the id that router gave it.
        let member = request.body["member"]?.stringValue ?? {
            memberSerial += 1
            return ConsumerGroupStateMachine.memberID(joinedAtMilliseconds: WheelDriver.systemNow().millisecondsSinceEpoch,
                                                      instance: settings.instance, serial: memberSerial)
        }()
        let stream = RouterStream(router: self, connection: connection, request: request, partitions: wanted, member: member)
        streams[connection.id] = stream
        stream.start(reply)
    }

    /// A dedicated link to partition `p`'s owner for one subscription (nil: no owner now).
    func streamLink(for p: Int) -> (link: UpstreamLink, remote: Bool)? {
        if let mine = local[p] { return (UpstreamLink(loop: loop, address: mine, token: settings.internalToken), false) }
        if let owner = owners[p], owner.address != advertised {
            return (UpstreamLink(loop: loop, address: owner.address, token: settings.peerToken), true)
        }
        return nil
    }

    // MARK: Stopping

    /// A lame-duck stop: no new connections; every client is told goodbye and its requests already
    /// read are answered (forwarded ones included), then it closes.
    func beginDrain() {
        guard !draining else { return }
        draining = true
        listener?.disable()
        let goodbye = WireReply.line(.object(["op": "goodbye", "reason": "shutting_down"]))
        for c in connections.open.values { c.goodbye(goodbye, reason: "server shutting down (goodbye sent)") }
    }

    func closeAll() {
        for c in connections.open.values { c.close(reason: "server shutting down") }
        for stream in streams.values { stream.close() }
        streams.removeAll()
        for link in links.values { link.close() }
        links.removeAll()
    }

    // MARK: Replies

    func stats() -> [String: JSONValue] {
        ["op": "stats", "instance": .string(settings.instance), "partitions": .int(Int64(partitioning.count)),
         "served": .array(local.keys.sorted().map { .int(Int64($0)) }), "connections": .int(Int64(connections.count)),
         "forwarded": .int(Int64(forwarded)), "forwardedRemote": .int(Int64(forwardedRemote)), "parked": .int(Int64(parked.count)),
         "subscriptions": .int(Int64(streams.count))]
    }

    func notOwner(partition p: Int, rid: JSONValue?) -> [UInt8] {
        let owner = owners[p]
        var error: [String: JSONValue] = [
            "code": "not_owner",
            "title": .string("Partition \(p) is not owned by this instance"),
            "detail": .string(owner.map { "Send it to \($0.address) (instance \($0.instance)), which owns partition \(p) at epoch \($0.epoch), or leave out \"route\":\"direct\" to have it forwarded." }
                ?? "Partition \(p) has no live owner right now (it is being taken over); leave out \"route\":\"direct\" to have it forwarded once it has one."),
            "partition": .int(Int64(p)),
        ]
        if let owner { error["address"] = .string(owner.address); error["epoch"] = .int(owner.epoch) }
        var o: [String: JSONValue] = ["ok": false, "error": .object(error)]
        if let rid { o["rid"] = rid }
        return WireReply.line(.object(o))
    }

    static func unavailable(_ p: Int, waited: Int64) -> RequestError {
        RequestError(code: "partition_unavailable", title: "Partition \(p) has no owner",
                     detail: "No instance served partition \(p) for \(waited) ms (its owner stopped and none has taken it over yet); nothing of this request was stored. Send it again.")
    }

    /// `line` without its newline (replies handed to a `ReplyHandler` are lines without one).
    static func bytes(_ line: [UInt8]) -> [UInt8] {
        line.last == 0x0A ? Array(line.dropLast()) : line
    }

    /// The line marked for partition `p` (`"route":{"partition":p}`), as sent to another instance:
    /// it serves it there or answers `not_owner`, and never forwards it again.
    static func directed(_ line: [UInt8], partition p: Int) -> [UInt8] {
        let line = undirected(line)
        guard line.first == UInt8(ascii: "{") else { return line }
        return Array(#"{"route":{"partition":\#(p)},"#.utf8) + line.dropFirst()
    }

    static func undirected(_ line: [UInt8]) -> [UInt8] {
        let mark = Array(#"{"route":{"partition":"#.utf8)
        guard line.starts(with: mark), let close = line[mark.count...].firstIndex(of: UInt8(ascii: "}")),
              close + 1 < line.count, line[close + 1] == UInt8(ascii: ",") else { return line }
        return [UInt8(ascii: "{")] + line[(close + 2)...]
    }

    static func isNotOwner(_ line: [UInt8]) -> Bool {
        line.withUnsafeBytes { RouterStream.contains($0, #""code":"not_owner""#) }
    }

    static func rid(of line: [UInt8]) -> JSONValue? {
        (try? JSONValue.parse(line))?["rid"]
    }
}
