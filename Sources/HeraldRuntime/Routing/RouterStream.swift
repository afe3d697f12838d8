// A client's subscription through a router: one stream from each partition's owner, relayed on the client's connection.
import HeraldCore

/// One subscribed client connection of a router (SPEC §9, consumers): a link per partition to its
/// owner, each carrying that partition's delivery lines in cursor order, relayed as they come
/// (partitions interleave; each keeps its order). The client's acks go to the link of the partition
/// they name. A link lost with its owner (a handover, a crash) subscribes again at the partition's
/// new owner: a durable consumer from its acknowledged cursor ("committed": at least once), an
/// ephemeral stream after the last cursor it relayed.
///
/// A durable subscription is one member of its consumer's group, under one member id at every
/// partition (`ConsumerGroupStateMachine`): each partition's service streams to one member of the
/// group and refuses the others' acks, so a member connected here may get only some partitions.
final class RouterStream {
    private let unretainedRouter: Unretained<Router>
    private let connectionRef: Unretained<ClientConnection>
    private let body: [String: JSONValue]
    private let durable: Bool
    private let rid: JSONValue?
    let partitions: [Int]
    /// This subscription's id in its consumer's group.
    let member: String
    private var links: [Int: UpstreamLink] = [:]
    /// The last cursor relayed per partition.
    private var lastCursor: [Int: Int64] = [:]
    private var closed = false
    /// Delivery lines that came before the subscribe reply went out: sent right after it (SPEC §5:
    /// subscribe, then delivery lines).
    private var held: [UInt8]? = []
    private let ticket: UInt64
    /// Links being replaced: not subscribed again until the router has an owner for them.
    private var missing: Set<Int> = []

    init(router: Router, connection: ClientConnection, request: ClientSession.Request, partitions: [Int], member: String) {
        self.member = member
        unretainedRouter = Unretained()
        unretainedRouter.object = router
        connectionRef = connection.unretained
        if case .object(let o) = request.body { body = o } else { body = [:] }
        rid = request.rid
        ticket = request.ticket
        durable = request.body["ephemeral"] != .bool(true) && request.body["consumer"]?.stringValue != nil
        self.partitions = partitions
    }

    /// Subscribes at every partition's owner; `reply` gets one answer once every owner answered (a
    /// partition without an owner now is subscribed when it gets one).
    func start(_ reply: @escaping UpstreamLink.ReplyHandler) {
        let gathering = Router.Gathering(count: partitions.count)
        let rid = self.rid
        func answered(_ p: Int, _ answer: JSONValue) {
            gathering.replies.append((p, answer))
            guard gathering.replies.count == gathering.count else { return }
            let sorted = gathering.replies.sorted { $0.partition < $1.partition }
            if let failed = sorted.first(where: { $0.reply["ok"] != .bool(true) && $0.reply["pending"] != .bool(true) }) {
                reply(Router.bytes(WireReply.line(ReplyMerge.with(rid: rid, failed.reply))))
                close()
                return
            }
            var fields: [String: JSONValue] = [:]
            if case .object(let first)? = sorted.first(where: { $0.reply["ok"] == .bool(true) })?.reply { fields = first }
            fields["rid"] = nil
            fields["partitions"] = .array(sorted.map { .int(Int64($0.partition)) })
            if self.durable { fields["member"] = .string(self.member) }
            reply(Router.bytes(WireReply.ok(rid: rid, fields)))
            self.connectionRef.object?.whenReplySent(ticket: self.ticket) { [weak self] in self?.releaseHeld() }
        }
        if partitions.isEmpty { reply(Router.bytes(WireReply.ok(rid: nil, ["partitions": .array([])]))); return }
        for p in partitions {
            guard subscribe(p, resumed: false, { answered(p, $0) }) else {
                missing.insert(p)
                answered(p, .object(["pending": true]))
                continue
            }
        }
    }

    /// Subscribes partition `p` at its owner; false when it has none now.
    @discardableResult
    private func subscribe(_ p: Int, resumed: Bool, _ answered: @escaping (JSONValue) -> Void) -> Bool {
        guard let router = unretainedRouter.object, let (link, remote) = router.streamLink(for: p) else { return false }
        var o = body
        o["op"] = "subscribe"
        o["partitions"] = remote ? .array([.int(Int64(p))]) : nil
        o["rid"] = nil
        if durable { o["member"] = .string(member) }
        if resumed {
            o["from"] = durable ? "committed" : lastCursor[p].map { .int($0) } ?? o["from"]
        }
        var line = WireReply.line(.object(o))
        if remote { line = Router.directed(line, partition: p) }
        links[p] = link
        link.onLine = { [weak self] line in self?.relay(line, partition: p) }
        link.onLost = { [weak self] _, why in self?.lost(p, why) }
        link.send(line, tag: p) { answer in answered((try? JSONValue.parse(answer)) ?? .object([:])) }
        return true
    }

    private func relay(_ line: UnsafeRawBufferPointer, partition p: Int) {
        guard !closed, let connection = connectionRef.object, !connection.isClosing else { return }
        // The stream's end as a single instance ends it: an operator deleted the consumer. Not
        // subscribed again.
        if Self.contains(line, #""code":"consumer_deleted""#) {
            close()
            var bytes = Array(line)
            bytes.append(0x0A)
            connection.closeAfterReplies(bytes, reason: "consumer stream ended by its partition's owner")
            return
        }
        if let cursor = Self.cursor(of: line) { lastCursor[p] = cursor }
        if held != nil {
            held!.append(contentsOf: line)
            held!.append(0x0A)
            return
        }
        var bytes = Array(line)
        bytes.append(0x0A)
        connection.send(bytes)
    }

    private func releaseHeld() {
        guard let lines = held else { return }
        held = nil
        guard !closed, let connection = connectionRef.object, !connection.isClosing, !lines.isEmpty else { return }
        connection.send(lines)
    }

    /// The client acks partition `p`: on the link that streams it (its owner's service keeps the cursor).
    func ack(_ line: [UInt8], partition p: Int, _ reply: @escaping UpstreamLink.ReplyHandler) {
        guard let link = links[p], !link.isClosed else {
            // Between owners: the ack goes to the partition's service all the same, naming this
            // member so that the group's fence applies.
            var named = line
            if case .object(var o)? = try? JSONValue.parse(line) {
                o["member"] = .string(member)
                named = WireReply.line(.object(o))
            }
            unretainedRouter.object?.forward(named, to: p, reply)
            return
        }
        link.send(link.address == unretainedRouter.object?.local[p] ? line : Router.directed(line, partition: p), tag: p, reply)
    }

    private func lost(_ p: Int, _ why: String) {
        guard !closed else { return }
        links[p] = nil
        missing.insert(p)
        unretainedRouter.object?.log("notice: the stream of partition \(p) ended (\(why)); subscribing again at its owner")
        unretainedRouter.object?.wantsRoutes?()
        resubscribeMissing()
    }

    /// Subscribes again the partitions whose links were lost, where an owner is known now.
    func resubscribeMissing() {
        guard !closed else { return }
        for p in missing.sorted() {
            let ok = subscribe(p, resumed: true) { [weak self] answer in
                if answer["ok"] != .bool(true) { self?.lost(p, "subscribing again failed: \(answer.canonicalString)") }
            }
            if ok { missing.remove(p) }
        }
    }

    func close() {
        closed = true
        for link in links.values { link.close() }
        links.removeAll()
    }

    /// The cursor of a delivery line (`{"cursor":n,…`), nil for other lines.
    static func cursor(of line: UnsafeRawBufferPointer) -> Int64? {
        let head = #"{"cursor":"#.utf8
        guard line.starts(with: head) else { return nil }
        var i = head.count, n: Int64 = 0, digits = 0
        while i < line.count, line[i] >= 0x30 && line[i] <= 0x39 { n = n * 10 + Int64(line[i] - 0x30); i += 1; digits += 1 }
        return digits > 0 ? n : nil
    }

    static func contains(_ line: UnsafeRawBufferPointer, _ text: String) -> Bool {
        let needle = Array(text.utf8)
        guard line.count >= needle.count else { return false }
        for i in 0...(line.count - needle.count) where line[i] == needle[0] {
            if line[i..<(i + needle.count)].elementsEqual(needle) { return true }
        }
        return false
    }
}
