// Consumers: durable named cursors, streamed from memory when close to the head, from PostgreSQL when behind.
import HeraldCore
import HeraldStore

extension HeraldService {
    func subscribe(_ request: ClientSession.Request, connection: ClientConnection, reply: Reply) {
        var ephemeral = false
        switch request.body["ephemeral"] {
        case nil, .bool(false)?: break
        case .bool(true)?: ephemeral = true
        default:
            reply(WireReply.error(rid: request.rid, RequestError(code: "invalid_field", title: "“ephemeral” must be true or false",
                detail: "Send \"ephemeral\":true to read without a durable cursor (nothing is acknowledged or stored), or leave it out.")))
            return
        }
        let name = request.body["consumer"]?.stringValue
        if !ephemeral || request.body["consumer"] != nil {
            guard let name, Self.isConsumerName(name) else {
                reply(WireReply.error(rid: request.rid, RequestError(code: "invalid_field", title: "subscribe needs a consumer name",
                    detail: "Send {\"op\":\"subscribe\",\"consumer\":\"<durable name>\"}; the name (1–200 bytes) keys the acknowledged cursor.")))
                return
            }
            if let offset = name.firstNonNFCOffset {
                reply(WireReply.error(rid: request.rid, RequestError.notNFC("consumer", of: "subscribe", at: offset)))
                return
            }
        }
        // One stream a connection: delivery lines do not name their consumer, so two streams on one
        // socket came interleaved, each cursor twice, with no way to tell which name to ack.
        if let streaming = connection.consumerName {
            if !streaming.isEmpty, let name {
                reply(WireReply.error(rid: request.rid, RequestError(code: "already_subscribed",
                    title: "This connection already streams consumer “\(clipped(streaming))”",
                    detail: "A connection carries one consumer's delivery lines, which do not name it. Open another connection to subscribe as “\(clipped(name))”, or reconnect to start “\(clipped(streaming))” again from another cursor.")))
            } else {
                let label = streaming.isEmpty ? "an ephemeral stream" : "consumer “\(clipped(streaming))”"
                reply(WireReply.error(rid: request.rid, RequestError(code: "already_subscribed",
                    title: "This connection already streams \(label)",
                    detail: "A connection carries one stream's delivery lines, which do not name it. Open another connection to subscribe again, or reconnect to start from another cursor.")))
            }
            return
        }
        let filter: ConsumerFilter?
        switch ConsumerFilter.parse(request.body["filter"]) {
        case .success(let f): filter = f
        case .failure(let error):
            reply(WireReply.error(rid: request.rid, error))
            return
        }
        let from = request.body["from"]
        var explicit: Int64?
        var fromEarliest = false
        switch from {
        case nil, .string("committed")?: explicit = nil
        case .string("earliest")?: explicit = 0; fromEarliest = true
        case .int(let n)? where n >= 0:
            // Past the newest delivery: the stream would start beyond deliveries not yet made and
            // silently skip them (a cursor from another or a restored database, say).
            guard n <= deliveryHead else {
                reply(WireReply.error(rid: request.rid, RequestError(code: "cursor_ahead",
                    title: "Cursor \(n) is past the newest delivery (\(deliveryHead))",
                    detail: "Deliveries up to \(n) have not been made yet, so starting there would skip them when they are. Was the cursor kept from another database? Subscribe with \"committed\" (the consumer's acknowledged cursor), \"earliest\", or a cursor of at most \(deliveryHead).")))
                return
            }
            explicit = n
        default:
            reply(WireReply.error(rid: request.rid, RequestError(code: "invalid_field", title: "“from” must be \"committed\", \"earliest\" or a cursor",
                detail: "Omit it to resume from the consumer's acknowledged cursor (new consumers start at the tail).")))
            return
        }
        let rid = request.rid
        // A router names the member (one id for the client's connection across every partition).
        let member = request.body["member"]?.stringValue.flatMap { Self.isConsumerName($0) ? $0 : nil }
        if !ephemeral, let name, consumers.deleting.contains(name) {
            reply(WireReply.error(rid: rid, .consumerBeingDeleted(name)))
            return
        }
        connection.consumerName = name ?? ""
        // A subscribe that fails leaves the connection free for another.
        let refuse = { (connection: ClientConnection, error: RequestError) in
            connection.consumerName = nil
            reply(WireReply.error(rid: rid, error))
        }
        if ephemeral, name == nil || explicit != nil {
            startStream(name ?? "", on: connection, at: explicit ?? deliveryHead, filter: filter, ephemeral: true, durable: nil, rid: rid, reply: reply, fromEarliest: fromEarliest)
            return
        }
        guard let name else { return }
        reader.query(ConsumerSQL.ackedCursorAndFilter, [name, String(partition)]) { [unretained, connectionRef = connection.unretained] result in
            guard let self = unretained.object, let connection = connectionRef.object, !connection.isClosing else { return }
            let acked: Int64?
            let storedFilter: String?
            switch result {
            case .failure(let error):
                refuse(connection, self.requestError(error))
                return
            case .success(let r):
                acked = r.rowCount > 0 ? r.int64(0, 0) : nil
                storedFilter = r.rowCount > 0 ? r.string(0, 1) : nil
            }
            let start = explicit ?? acked ?? self.deliveryHead
            // Ephemeral under a name: from that consumer's cursor, which it does not move.
            if ephemeral {
                self.startStream(name, on: connection, at: start, filter: filter, ephemeral: true, durable: nil, rid: rid, reply: reply, fromEarliest: fromEarliest)
                return
            }
            let filterText = filter?.json.canonicalString
            guard let acked else {
                // A new name is made durable at its starting cursor before anything is streamed: a
                // consumer that reconnects "committed" before its first ack resumes there, not at the
                // head — deliveries made meanwhile are not skipped (at least once from its start).
                guard let writer = self.writerOrRefuse(rid: rid, reply: reply) else {
                    connection.consumerName = nil
                    return
                }
                writer.ack(consumer: name, partition: Int32(self.partition), cursor: start) { [unretained] result in
                    guard let self = unretained.object, let connection = connectionRef.object, !connection.isClosing else { return }
                    switch result {
                    case .success where filterText == nil:
                        self.startStream(name, on: connection, at: start, filter: nil, ephemeral: false, durable: start, member: member, rid: rid, reply: reply, fromEarliest: fromEarliest)
                    case .success:
                        self.storeFilter(filterText, of: name, on: connection, refuse: refuse) {
                            self.startStream(name, on: connection, at: start, filter: filter, ephemeral: false, durable: start, member: member, rid: rid, reply: reply, fromEarliest: fromEarliest)
                        }
                    case .failure(let error): refuse(connection, self.requestError(error))
                    }
                }
                self.store.kick()
                return
            }
            guard storedFilter != filterText else {
                self.startStream(name, on: connection, at: start, filter: filter, ephemeral: false, durable: acked, member: member, committed: explicit == nil,
                                 rid: rid, reply: reply, fromEarliest: fromEarliest && explicit != nil)
                return
            }
            self.storeFilter(filterText, of: name, on: connection, refuse: refuse) {
                self.startStream(name, on: connection, at: start, filter: filter, ephemeral: false, durable: acked, member: member, committed: explicit == nil,
                                 rid: rid, reply: reply, fromEarliest: fromEarliest && explicit != nil)
            }
        }
    }

    /// Records the filter a consumer subscribed with (nil: none), then `then` — the filter shown by
    /// `consumers` is always the one of the last subscribe, live or not.
    private func storeFilter(_ text: String?, of name: String, on connection: ClientConnection,
                             refuse: @escaping (ClientConnection, RequestError) -> Void, then: @escaping () -> Void) {
        reader.query("UPDATE consumers SET filter = $2 WHERE name = $1", [name, text]) { [unretained, connectionRef = connection.unretained] result in
            guard let self = unretained.object, let connection = connectionRef.object, !connection.isClosing else { return }
            switch result {
            case .success: then()
            case .failure(let error): refuse(connection, self.requestError(error))
            }
        }
    }

    /// Answers a subscribe, unless `start` is behind the retention horizon: then `cursor_expired`
    /// (from "earliest": the horizon).
    private func startStream(_ name: String, on connection: ClientConnection, at start: Int64, filter: ConsumerFilter?,
                             ephemeral: Bool, durable: Int64?, member: String? = nil, committed: Bool = false,
                             rid: JSONValue?, reply: Reply, fromEarliest: Bool = false) {
        reader.query(Self.retentionCursorSQL, [String(partition)]) { [unretained, connectionRef = connection.unretained] result in
            guard let self = unretained.object, let connection = connectionRef.object, !connection.isClosing else { return }
            let earliest = (try? result.get())?.int64(0, 0) ?? 0
            if start < earliest && !fromEarliest {
                connection.consumerName = nil
                reply(Self.cursorExpiredLine(rid: rid, partition: self.partition, position: start, earliest: earliest))
                return
            }
            self.beginStream(name, on: connection, at: max(start, earliest), filter: filter, ephemeral: ephemeral, durable: durable,
                             member: member, committed: committed, rid: rid, reply: reply)
        }
    }

    /// An ephemeral stream starts at `start`; a durable one joins its name's group, and streams
    /// (from `start`) if the group's rule gives it this partition.
    private func beginStream(_ name: String, on connection: ClientConnection, at start: Int64, filter: ConsumerFilter?,
                             ephemeral: Bool, durable: Int64?, member requested: String?, committed: Bool,
                             rid: JSONValue?, reply: Reply) {
        var fields: [String: JSONValue] = ["op": "subscribe", "cursor": .int(start)]
        if !name.isEmpty { fields["consumer"] = .string(name) }
        if let filter { fields["filter"] = filter.json }
        if ephemeral {
            let stream = ConsumerStream(name: name, connection: connection, position: start, filter: filter, ephemeral: true)
            fields["ephemeral"] = true
            consumers.subscribedEphemeral(stream)
            reply(WireReply.ok(rid: rid, fields))
            begin(stream, afterReply: reply.ticket, on: connection)
            return
        }
        let member = requested ?? newMemberID()
        // From the cursor acknowledged: the group here may know a later one than the database
        // told this subscribe (an ack accepted and not yet stored, or stored meanwhile).
        var start = start
        if committed, let known = consumers.groups[name]?.acked, known > start { start = known; fields["cursor"] = .int(start) }
        let (_, handover) = consumers.joined(name, member: member, connection: connection, filter: filter,
                                             partition: partition, partitionCount: partitioning.count, acked: durable ?? start)
        fields["member"] = .string(member)
        reply(WireReply.ok(rid: rid, fields))
        if let handover { handOver(name, handover, joining: (member, start, reply.ticket)) }
    }

    /// A member id for a connection that subscribed here directly.
    private func newMemberID() -> String {
        memberSerial += 1
        return ConsumerGroupStateMachine.memberID(joinedAtMilliseconds: WheelDriver.systemNow().millisecondsSinceEpoch,
                                                  instance: instanceName, serial: memberSerial)
    }

    /// Carries out a change of the member that streams `name`: the revoked one's stream stops (its
    /// connection stays, a member still), the assigned one's starts from the acknowledged cursor —
    /// or, for a member joining with this change, from where its subscribe asked, once its reply
    /// has gone out.
    func handOver(_ name: String, _ handover: ConsumerGroupStateMachine.Handover,
                  joining: (member: String, start: Int64, ticket: UInt64)? = nil) {
        if handover.revoked != nil { consumers.stopStreaming(name) }
        guard let assigned = handover.assigned, let group = consumers.groups[name],
              let member = group.members[assigned], let connection = member.connection.object, !connection.isClosing else { return }
        let joined = joining?.member == assigned ? joining : nil
        let start = joined?.start ?? group.acked
        let stream = ConsumerStream(name: name, connection: connection, position: start, filter: member.filter,
                                    ephemeral: false, durableAcked: group.acked)
        consumers.streaming(stream)
        if handover.revoked != nil || joined == nil {
            log("consumer \(name): partition \(partition) streams to member \(assigned) from cursor \(start) (generation \(handover.generation))")
        }
        if let joined {
            begin(stream, afterReply: joined.ticket, on: connection)
        } else {
            stream.started = true
            pump(stream)
        }
    }

    /// The reply waits for the connection's earlier replies; the lines wait for the reply.
    private func begin(_ stream: ConsumerStream, afterReply ticket: UInt64, on connection: ClientConnection) {
        connection.whenReplySent(ticket: ticket) { [unretained, weak stream] in
            guard let self = unretained.object, let stream else { return }
            stream.started = true
            self.pump(stream)
        }
    }

    /// A durable consumer name: 1–200 bytes (what `subscribe` and `ack` both take).
    static func isConsumerName(_ name: String) -> Bool { !name.isEmpty && name.utf8.count <= 200 }

    func ack(_ request: ClientSession.Request, connection: ClientConnection, reply: Reply) {
        guard let name = request.body["consumer"]?.stringValue, let cursor = request.body["cursor"]?.intValue else {
            reply(WireReply.error(rid: request.rid, RequestError(code: "invalid_field", title: "ack needs consumer and cursor",
                detail: "Send {\"op\":\"ack\",\"consumer\":\"<name>\",\"cursor\":<last cursor processed>}: a string and an integer.")))
            return
        }
        guard Self.isConsumerName(name) else {
            reply(WireReply.error(rid: request.rid, RequestError(code: "invalid_field", title: "ack needs a consumer name of 1–200 bytes",
                detail: "Ack with the durable name the consumer subscribed with; subscribe refuses any other, so no stream has this one.")))
            return
        }
        if let named = request.body["partition"], named != .int(Int64(partition)) {
            let known = named.intValue.map { $0 >= 0 && $0 < Int64(partitioning.count) } ?? false
            reply(WireReply.error(rid: request.rid, known
                ? RequestError(code: "not_owner", title: "Partition \(named.canonicalString) is not served here",
                               detail: "This connection streams partition \(partition); ack each partition on the connection that streamed its delivery lines.")
                : RequestError(code: "invalid_field", title: "Partition \(named.canonicalString) is not one of this database's",
                               detail: "This database has \(partitioning.count) partition(s), numbered from 0: ack the partition a delivery line named.")))
            return
        }
        guard cursor >= 0 else {
            reply(WireReply.error(rid: request.rid, RequestError(code: "invalid_field", title: "Cursor \(cursor) is negative",
                detail: "Cursors start at 1; ack the cursor of the last delivery line processed (0 acknowledges none).")))
            return
        }
        if let offset = name.firstNonNFCOffset {
            reply(WireReply.error(rid: request.rid, RequestError.notNFC("consumer", of: "ack", at: offset)))
            return
        }
        let rid = request.rid
        // Fenced by the group: only the member streaming the partition moves its cursor.
        let member = request.body["member"]?.stringValue ?? (connection.consumerName == name ? connection.consumerMember : nil)
        if let group = consumers.groups[name], case .refuse(let streamer, let generation) = group.machine.ackReceived(from: member) {
            reply(WireReply.error(rid: rid, .partitionReassigned(name, partition: partition, streamer: streamer, generation: generation)))
            return
        }
        // Subscribed here now: known. Otherwise the name must be durable already (a subscribe made
        // it): an ack of a mistyped name created a consumer that never caught up, for good, in
        // `herald_consumer_lag`.
        guard consumers.isSubscribed(name) else {
            reader.query("SELECT 1 FROM consumers WHERE name = $1", [name]) { [unretained] result in
                guard let self = unretained.object else { return }
                switch result {
                case .failure(let error): reply(WireReply.error(rid: rid, self.requestError(error)))
                case .success(let r) where r.rowCount == 0:
                    reply(WireReply.error(rid: rid, RequestError(code: "unknown_consumer",
                        title: "No consumer named “\(clipped(name))” has subscribed",
                        detail: "An ack moves the acknowledged cursor of a durable consumer, and subscribe is what creates one. Check the name (it must be the one the consumer subscribed with), or subscribe first.")))
                case .success: self.storeAck(name, cursor: cursor, rid: rid, reply: reply)
                }
            }
            return
        }
        storeAck(name, cursor: cursor, rid: rid, reply: reply)
    }

    /// Moves `name`'s acknowledged cursor forward to `cursor` (clamped to the head) and replies.
    private func storeAck(_ name: String, cursor: Int64, rid: JSONValue?, reply: Reply) {
        guard !consumers.deleting.contains(name) else {
            reply(WireReply.error(rid: rid, .consumerBeingDeleted(name)))
            return
        }
        guard let writer = writerOrRefuse(rid: rid, reply: reply) else { return }
        var target = cursor
        // A filtered consumer that acknowledged every line it was sent also passes the lines its
        // filter left out after them: it is never held behind lines it does not want.
        let stream = consumers.streams[name].flatMap { $0.filter != nil ? $0 : nil }
        if let stream {
            stream.clientAcked = max(stream.clientAcked, cursor)
            if cursor >= stream.lastSent { target = max(cursor, stream.position) }
        }
        // A new streamer starts after an ack accepted here, even before it is stored: the member
        // that sent it processed those lines, and its ack is not refused once the partition moves.
        consumers.acknowledged(name, through: min(target, deliveryHead))
        writer.ack(consumer: name, partition: Int32(partition), cursor: min(target, deliveryHead)) { [unretained, weak stream] result in
            guard let self = unretained.object else { return }
            switch result {
            case .success(let acked):
                if let stream { stream.durableAcked = max(stream.durableAcked, acked) }
                self.consumers.acknowledged(name, through: acked)
                reply(WireReply.ok(rid: rid, ["cursor": .int(acked)]))
            case .failure(let error): reply(WireReply.error(rid: rid, self.requestError(error)))
            }
        }
        store.kick()
    }

    /// New deliveries were committed: wake every consumer that is caught up.
    func publish() {
        for stream in consumers.allStreams where !stream.reading { pump(stream) }
    }

    /// Sends what the consumer has not seen, while its socket buffer has room.
    func pump(_ stream: ConsumerStream) {
        guard let connection = stream.connection, !connection.isClosing else {
            consumers.streamEnded(stream)
            return
        }
        guard stream.started else { return }
        // A page read from PostgreSQL is in flight: its completion pumps again. A second read from
        // the same position (e.g. a drain callback armed earlier) would send that page twice and
        // the stream would go backwards (found by experiment 6, docs/reliability.md).
        guard !stream.reading else { return }
        while stream.position < deliveryHead || stream.page != nil {
            if connection.outputBytes >= configuration.consumerBufferBytes {
                // Slow consumer: pause; resume when its socket drains (from PostgreSQL if the ring moved on).
                connection.onDrained = { [unretained, weak stream] in
                    guard let self = unretained.object, let stream else { return }
                    stream.connection?.onDrained = nil
                    self.pump(stream)
                }
                return
            }
            let next = stream.position + 1
            if stream.page != nil {
                sendFromPage(stream, connection)
            } else if !ring.isEmpty && next >= ring.firstCursor {
                let index = Int(next - ring.firstCursor)
                guard index < ring.count else { return }
                lineScratch.sink.removeAll()
                var i = index
                if let filter = stream.filter {
                    // Lines left out cost a tag test each, no copy; the position passes them too.
                    var sent = stream.lastSent
                    while i < ring.count && lineScratch.sink.count < Self.consumerBatchBytes {
                        if filter.matches(kindCode: ring.tags[i].kindCode, app: ring.tags[i].app) {
                            ring.bodies[i].withUnsafeBytes { Self.appendLine($0, partition: partition, cursor: ring.firstCursor + Int64(i), to: &lineScratch.sink) }
                            sent = ring.firstCursor + Int64(i)
                        }
                        i += 1
                    }
                    stream.lastSent = sent
                    if lineScratch.sink.count > 0 { connection.send(lineScratch.sink.bytes) }
                } else {
                    while i < ring.count && lineScratch.sink.count < Self.consumerBatchBytes {
                        ring.bodies[i].withUnsafeBytes { Self.appendLine($0, partition: partition, cursor: ring.firstCursor + Int64(i), to: &lineScratch.sink) }
                        i += 1
                    }
                    connection.send(lineScratch.sink.bytes)
                }
                stream.position = ring.firstCursor + Int64(i) - 1
            } else {
                readBehind(stream)
                return
            }
        }
        if stream.mayAdvanceOverSkipped { advanceOverSkipped(stream) }
    }

    /// A filtered consumer caught up with every line it was sent acknowledged, and lines left out
    /// after them: its durable cursor moves past those (one write in flight per stream), so its lag
    /// ends at zero and a reconnect does not read them again.
    func advanceOverSkipped(_ stream: ConsumerStream) {
        guard !stream.advancing, case .success(let writer) = store.currentWriter() else { return }
        stream.advancing = true
        let target = stream.position
        writer.ack(consumer: stream.name, partition: Int32(partition), cursor: target) { [unretained, weak stream] result in
            guard let self = unretained.object, let stream else { return }
            stream.advancing = false
            guard case .success(let acked) = result else { return }
            stream.durableAcked = max(stream.durableAcked, acked)
            self.consumers.acknowledged(stream.name, through: acked)
            if self.consumers.isCurrent(stream), stream.mayAdvanceOverSkipped { self.advanceOverSkipped(stream) }
        }
        store.kick()
    }

    /// Bytes of delivery lines queued to a consumer at once, from the ring or from PostgreSQL.
    static let consumerBatchBytes = 256 * 1024

    /// Rows of one catch-up read: enough that a consumer far behind (a storm that outran the ring)
    /// pays one query per few megabytes, not per 256 KiB batch.
    static let catchUpPageRows = 4_000

    /// A consumer behind the in-memory ring reads a page from PostgreSQL; `pump` sends it a batch
    /// at a time as the consumer drains.
    func readBehind(_ stream: ConsumerStream) {
        stream.reading = true
        let sentAt = FiringPhases.now()
        defer { catchUpReadSent?(stream) }
        // A filter is applied by PostgreSQL: the rows it leaves out come without their body.
        let sql: String
        var parameters: [String?] = [String(stream.position)]
        if let filter = stream.filter {
            sql = "SELECT cursor, CASE WHEN ($2::jsonb IS NULL OR $2::jsonb ? kind) AND ($3::jsonb IS NULL OR $3::jsonb ? app) THEN body END, user_id "
                + "FROM deliveries WHERE partition = \(partition) AND cursor > $1 ORDER BY cursor LIMIT \(Self.catchUpPageRows)"
            parameters.append(filter.json["kinds"]?.canonicalString)
            parameters.append(filter.json["apps"]?.canonicalString)
        } else {
            sql = "SELECT cursor, body, user_id FROM deliveries WHERE partition = \(partition) AND cursor > $1 ORDER BY cursor LIMIT \(Self.catchUpPageRows)"
        }
        reader.query(sql, parameters) { [unretained, weak stream] result in
            guard let self = unretained.object, let stream else { return }
            stream.reading = false
            self.phases.catchUpReads += 1
            self.phases.catchUpNanoseconds += FiringPhases.now() - sentAt
            guard stream.connection != nil else { return }
            let r: PGResult
            switch result {
            case .success(let page): r = page
            case .failure(let error): self.retryCatchUp(stream, after: error); return
            }
            if stream.failedReads > 0 {
                self.log("consumer \(stream.name): reading deliveries from PostgreSQL works again after \(stream.failedReads) failed attempt(s)")
                stream.failedReads = 0
            }
            guard r.rowCount > 0 else { return }
            // Cursors are gap-free: a first row past the next one means `herald retain` dropped them.
            if let first = r.decimal(0, 0), first > stream.position + 1 {
                stream.connection?.closeAfterReplies(Self.cursorExpiredLine(rid: nil, partition: self.partition, position: stream.position, earliest: first - 1),
                                                     reason: "consumer \(stream.name) is behind the retention horizon")
                return
            }
            stream.page = r
            stream.pageNext = 0
            self.pump(stream)
        }
    }

    /// How long a consumer behind the ring waits before reading again after a read failed.
    static let catchUpRetryMilliseconds: Int64 = 250

    /// A catch-up read failed (PostgreSQL restarted, the read connection was lost): reads again
    /// after `catchUpRetryMilliseconds`. Without it the consumer waited for the next committed
    /// delivery to pump it again, which on a quiet service never came: it stayed behind with
    /// deliveries stored and unsent. The first failure of a run is logged.
    func retryCatchUp(_ stream: ConsumerStream, after error: StoreError) {
        if stream.failedReads == 0 {
            log("warning: consumer \(stream.name): reading the deliveries after cursor \(stream.position) from PostgreSQL failed "
                + "(\(error)); reading again every \(Self.catchUpRetryMilliseconds) ms until it works")
        }
        stream.failedReads += 1
        if stream.retry == nil {
            stream.retry = loop.timer { [unretained, weak stream] in
                guard let self = unretained.object, let stream, self.consumers.isCurrent(stream) else { return }
                self.pump(stream)
            }
        }
        stream.retry?.arm(afterMilliseconds: Self.catchUpRetryMilliseconds)
    }

    /// Sends the next batch (at most `consumerBatchBytes`, at least one line) of the stream's page
    /// rows after its position; drops the page once every row was sent.
    private func sendFromPage(_ stream: ConsumerStream, _ connection: ClientConnection) {
        guard let page = stream.page else { return }
        lineScratch.sink.removeAll()
        var i = stream.pageNext
        while i < page.rowCount && lineScratch.sink.count < Self.consumerBatchBytes {
            if let cursor = page.decimal(i, 0), cursor > stream.position {
                // A null body: a row the stream's filter leaves out (`readBehind`).
                if stream.filter == nil || !page.isNull(i, 1) {
                    page.withBytes(i, 1) { body in
                        switch contentKeys.ring.open(body, user: page.string(i, 2)) {
                        case .clear: Self.appendLine(body, partition: partition, cursor: cursor, to: &lineScratch.sink)
                        case .opened(let b), .erased(let b): b.withUnsafeBytes { Self.appendLine($0, partition: partition, cursor: cursor, to: &lineScratch.sink) }
                        }
                    }
                    stream.lastSent = cursor
                }
                stream.position = cursor
                phases.catchUpRows += 1
            }
            i += 1
        }
        stream.pageNext = i
        if i >= page.rowCount { stream.page = nil }
        if lineScratch.sink.count > 0 { connection.send(lineScratch.sink.bytes) }
    }
}

extension RequestError {
    /// An ack from a group member that no longer streams the partition (SPEC §9: fenced).
    static func partitionReassigned(_ name: String, partition: Int, streamer: String?, generation: Int64) -> RequestError {
        RequestError(code: "partition_reassigned",
                     title: "Partition \(partition) of consumer “\(clipped(name))” streams to another member now (generation \(generation))",
                     detail: "A member joined or left the group, and the partition moved to member \(streamer ?? "none"). This ack was not stored: the deliveries after the last acknowledged cursor go to that member, so none is skipped.")
    }
}
