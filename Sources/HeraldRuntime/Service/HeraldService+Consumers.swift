// Consumers: durable named cursors, streamed from memory when close to the head, from PostgreSQL when behind.
import HeraldCore
import HeraldStore

extension HeraldService {
    func subscribe(_ request: ClientSession.Request, connection: ClientConnection, reply: Reply) {
        guard let name = request.body["consumer"]?.stringValue, Self.isConsumerName(name) else {
            reply(WireReply.error(rid: request.rid, RequestError(code: "invalid_field", title: "subscribe needs a consumer name",
                detail: "Send {\"op\":\"subscribe\",\"consumer\":\"<durable name>\"}; the name (1–200 bytes) keys the acknowledged cursor.")))
            return
        }
        if let offset = name.firstNonNFCOffset {
            reply(WireReply.error(rid: request.rid, RequestError.notNFC("consumer", of: "subscribe", at: offset)))
            return
        }
        // One stream a connection: delivery lines do not name their consumer, so two streams on one
        // socket came interleaved, each cursor twice, with no way to tell which name to ack.
        if let streaming = connection.consumerName {
            reply(WireReply.error(rid: request.rid, RequestError(code: "already_subscribed",
                title: "This connection already streams consumer “\(clipped(streaming))”",
                detail: "A connection carries one consumer's delivery lines, which do not name it. Open another connection to subscribe as “\(clipped(name))”, or reconnect to start “\(clipped(streaming))” again from another cursor.")))
            return
        }
        let from = request.body["from"]
        var explicit: Int64?
        switch from {
        case nil, .string("committed")?: explicit = nil
        case .string("earliest")?: explicit = 0
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
        connection.consumerName = name
        // A subscribe that fails leaves the connection free for another.
        let refuse = { (connection: ClientConnection, error: RequestError) in
            connection.consumerName = nil
            reply(WireReply.error(rid: rid, error))
        }
        reader.query(ConsumerSQL.ackedCursor, [name, "0"]) { [unretained, connectionRef = connection.unretained] result in
            guard let self = unretained.object, let connection = connectionRef.object, !connection.isClosing else { return }
            let acked: Int64?
            switch result {
            case .failure(let error):
                refuse(connection, self.requestError(error))
                return
            case .success(let r):
                acked = r.rowCount > 0 ? r.int64(0, 0) : nil
            }
            let start = explicit ?? acked ?? self.deliveryHead
            guard acked == nil else {
                self.startStream(name, on: connection, at: start, rid: rid, reply: reply)
                return
            }
            // A new name is made durable at its starting cursor before anything is streamed: a
            // consumer that reconnects "committed" before its first ack resumes there, not at the
            // head — deliveries made meanwhile are not skipped (at least once from its start).
            guard let writer = self.writerOrRefuse(rid: rid, reply: reply) else {
                connection.consumerName = nil
                return
            }
            writer.ack(consumer: name, cursor: start) { [unretained] result in
                guard let self = unretained.object, let connection = connectionRef.object, !connection.isClosing else { return }
                switch result {
                case .success: self.startStream(name, on: connection, at: start, rid: rid, reply: reply)
                case .failure(let error): refuse(connection, self.requestError(error))
                }
            }
            self.store.kick()
        }
    }

    /// Answers a subscribe and streams from `start` (another connection of the same name is closed).
    private func startStream(_ name: String, on connection: ClientConnection, at start: Int64, rid: JSONValue?, reply: Reply) {
        let stream = ConsumerStream(name: name, connection: connection, position: start)
        if let displaced = consumers.subscribed(stream) {
            // Said to it, after the replies it is owed (a bare close looked like a network fault).
            displaced.closeAfterReplies(WireReply.error(rid: nil, .subscribedElsewhere(name)),
                                        reason: "consumer \(name) subscribed again on another connection")
        }
        reply(WireReply.ok(rid: rid, ["op": "subscribe", "consumer": .string(name), "cursor": .int(start)]))
        // The reply waits for the connection's earlier replies; the lines wait for the reply.
        connection.whenReplySent(ticket: reply.ticket) { [unretained, weak stream] in
            guard let self = unretained.object, let stream else { return }
            stream.started = true
            self.pump(stream)
        }
    }

    /// A durable consumer name: 1–200 bytes (what `subscribe` and `ack` both take).
    static func isConsumerName(_ name: String) -> Bool { !name.isEmpty && name.utf8.count <= 200 }

    func ack(_ request: ClientSession.Request, reply: Reply) {
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
        if let partition = request.body["partition"], partition != .int(0) {
            reply(WireReply.error(rid: request.rid, RequestError(code: "invalid_field",
                title: "Partition \(partition.canonicalString) is not one of this database's",
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
        guard let writer = writerOrRefuse(rid: rid, reply: reply) else { return }
        writer.ack(consumer: name, cursor: min(cursor, deliveryHead)) { [unretained] result in
            guard let self = unretained.object else { return }
            switch result {
            case .success(let acked): reply(WireReply.ok(rid: rid, ["cursor": .int(acked)]))
            case .failure(let error): reply(WireReply.error(rid: rid, self.requestError(error)))
            }
        }
        store.kick()
    }

    /// New deliveries were committed: wake every consumer that is caught up.
    func publish() {
        for stream in consumers.streams.values where !stream.reading { pump(stream) }
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
                while i < ring.count && lineScratch.sink.count < Self.consumerBatchBytes {
                    ring.bodies[i].withUnsafeBytes { Self.appendLine($0, cursor: ring.firstCursor + Int64(i), to: &lineScratch.sink) }
                    i += 1
                }
                connection.send(lineScratch.sink.bytes)
                stream.position = ring.firstCursor + Int64(i) - 1
            } else {
                readBehind(stream)
                return
            }
        }
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
        reader.query("SELECT cursor, body, user_id FROM deliveries WHERE cursor > $1 ORDER BY cursor LIMIT \(Self.catchUpPageRows)",
                     [String(stream.position)]) { [unretained, weak stream] result in
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
                page.withBytes(i, 1) { body in
                    switch contentKeys.ring.open(body, user: page.string(i, 2)) {
                    case .clear: Self.appendLine(body, cursor: cursor, to: &lineScratch.sink)
                    case .opened(let b), .erased(let b): b.withUnsafeBytes { Self.appendLine($0, cursor: cursor, to: &lineScratch.sink) }
                    }
                }
                stream.position = cursor
                phases.catchUpRows += 1
            }
            i += 1
        }
        stream.pageNext = i
        if i >= page.rowCount { stream.page = nil }
        connection.send(lineScratch.sink.bytes)
    }
}
