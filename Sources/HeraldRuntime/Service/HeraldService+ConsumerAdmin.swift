// Consumer administration: the admin ops `consumers` (positions, lag, filters, members) and `deleteConsumer`.
import HeraldCore
import HeraldStore

extension HeraldService {
    /// `consumers`: every durable consumer with its acknowledged cursor and lag (against the
    /// stored delivery head, as `herald_consumer_lag` computes it), its filter, when it last acked,
    /// and the connections streaming it now; then the ephemeral streams.
    func listConsumers(_ request: ClientSession.Request, reply: Reply) {
        let rid = request.rid
        let utc = "'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'"
        reader.query("SELECT c.name, coalesce(k.acked, 0), c.filter, to_char(k.updated_at AT TIME ZONE 'UTC', \(utc)), "
                     + "to_char(c.created_at AT TIME ZONE 'UTC', \(utc)), (SELECT cursor FROM delivery_heads WHERE partition = $1) "
                     + "FROM consumers c LEFT JOIN consumer_cursors k ON k.name = c.name AND k.partition = $1 ORDER BY c.name", [String(partition)]) { [unretained] result in
            guard let self = unretained.object else { return }
            let r: PGResult
            switch result {
            case .failure(let error): reply(WireReply.error(rid: rid, self.requestError(error))); return
            case .success(let page): r = page
            }
            var list: [JSONValue] = []
            list.reserveCapacity(r.rowCount)
            for i in 0..<r.rowCount {
                let name = r.string(i, 0) ?? ""
                let acked = r.int64(i, 1) ?? 0
                let head = r.int64(i, 5) ?? 0
                let filter = r.string(i, 2).flatMap { try? JSONValue.parse(Array($0.utf8)) } ?? .null
                list.append(.object([
                    "consumer": .string(name),
                    "lag": .int(head - acked),
                    "partitions": .array([.object(["partition": .int(Int64(self.partition)), "acked": .int(acked), "head": .int(head), "lag": .int(head - acked)])]),
                    "filter": filter,
                    "ackedAt": r.string(i, 3).map(JSONValue.string) ?? .null,
                    "createdAt": r.string(i, 4).map(JSONValue.string) ?? .null,
                    "members": .array(self.groupMembersJSON(name)),
                ]))
            }
            reply(WireReply.ok(rid: rid, [
                "op": "consumers",
                "consumers": .array(list),
                "ephemeral": .array(self.consumers.ephemeral.values.sorted { ($0.connection?.id ?? 0) < ($1.connection?.id ?? 0) }.map(Self.memberJSON)),
            ]))
        }
    }

    /// The members of `name`'s group here, newest first: each its member id, connection and peer,
    /// and the partitions it streams (this one, or none) under the group's generation.
    private func groupMembersJSON(_ name: String) -> [JSONValue] {
        guard let group = consumers.groups[name] else { return [] }
        return group.machine.members.compactMap { id in
            guard let member = group.members[id], let connection = member.connection.object else { return nil }
            var o: [String: JSONValue] = [
                "member": .string(id),
                "connection": .int(Int64(connection.id)),
                "peer": .string(connection.peer),
                "partitions": .array(group.machine.streamer == id ? [.int(Int64(partition))] : []),
                "generation": .int(group.machine.generation),
            ]
            if let filter = member.filter { o["filter"] = filter.json }
            if group.machine.streamer == id, let stream = consumers.streams[name] {
                o["sent"] = .int(stream.lastSent)
                o["position"] = .int(stream.position)
                o["queuedBytes"] = .int(Int64(connection.outputBytes))
            }
            return .object(o)
        }
    }

    /// One ephemeral stream: its connection, the peer's address and the last cursor it was sent.
    private static func memberJSON(_ stream: ConsumerStream) -> JSONValue {
        var o: [String: JSONValue] = [
            "connection": .int(Int64(stream.connection?.id ?? 0)),
            "peer": .string(stream.connection?.peer ?? ""),
            "sent": .int(stream.lastSent),
            "position": .int(stream.position),
            "queuedBytes": .int(Int64(stream.connection?.outputBytes ?? 0)),
        ]
        if stream.ephemeral && !stream.name.isEmpty { o["consumer"] = .string(stream.name) }
        if let filter = stream.filter { o["filter"] = filter.json }
        return .object(o)
    }

    /// `deleteConsumer {consumer}`: its live connections get a `consumer_deleted` error line (after
    /// the replies they are owed) and close; then its cursor row is removed, so the name starts
    /// afresh (from the tail, or `earliest`). Acks of the name are refused while it is deleted,
    /// and every ack stored before is committed first, so none brings the old cursor back.
    func deleteConsumer(_ request: ClientSession.Request, reply: Reply) {
        guard let name = request.body["consumer"]?.stringValue, Self.isConsumerName(name) else {
            reply(WireReply.error(rid: request.rid, RequestError(code: "invalid_field", title: "deleteConsumer needs a consumer name",
                detail: "Send {\"op\":\"deleteConsumer\",\"consumer\":\"<durable name>\"}; the op \"consumers\" lists them.")))
            return
        }
        let rid = request.rid
        guard !consumers.deleting.contains(name) else {
            reply(WireReply.error(rid: rid, .consumerBeingDeleted(name)))
            return
        }
        consumers.deleting.insert(name)
        let fail = { [unretained] (error: RequestError) in
            unretained.object?.consumers.deleting.remove(name)
            reply(WireReply.error(rid: rid, error))
        }
        reader.query("SELECT 1 FROM consumers WHERE name = $1", [name]) { [unretained] result in
            guard let self = unretained.object else { return }
            let exists: Bool
            switch result {
            case .failure(let error): fail(self.requestError(error)); return
            case .success(let r): exists = r.rowCount > 0
            }
            let members = self.consumers.deleted(name)
            guard exists || !members.isEmpty else {
                fail(RequestError(code: "unknown_consumer", title: "No consumer named “\(clipped(name))” exists",
                    detail: "Nothing was deleted. The op \"consumers\" (or `herald consumers list`) lists the durable consumers; check the name's spelling and case."))
                return
            }
            for connection in members {
                connection.closeAfterReplies(WireReply.error(rid: nil, .consumerDeleted(name)),
                                             reason: "consumer \(name) deleted by an operator")
            }
            guard case .success(let writer) = self.store.currentWriter() else {
                fail(.storeUnavailable("the writer connection to PostgreSQL is not ready"))
                return
            }
            // Behind every ack queued before it: once it commits, they have, and the row can go.
            writer.ack(consumer: name, cursor: 0) { [unretained] result in
                guard let self = unretained.object else { return }
                if case .failure(let error) = result { fail(self.requestError(error)); return }
                self.reader.query("WITH cursors AS (DELETE FROM consumer_cursors WHERE name = $1 RETURNING partition, acked), "
                                  + "named AS (DELETE FROM consumers WHERE name = $1 RETURNING name) "
                                  + "SELECT coalesce((SELECT acked FROM cursors WHERE partition = $2), 0) FROM named", [name, String(self.partition)]) { [unretained] result in
                    guard let self = unretained.object else { return }
                    switch result {
                    case .failure(let error): fail(self.requestError(error))
                    case .success(let r):
                        self.consumers.deleting.remove(name)
                        self.log("consumer \(name) deleted (acknowledged cursor \(r.int64(0, 0) ?? 0), \(members.count) live connection(s) closed)")
                        reply(WireReply.ok(rid: rid, [
                            "op": "deleteConsumer", "consumer": .string(name),
                            "acked": .int(r.int64(0, 0) ?? 0), "closedConnections": .int(Int64(members.count)),
                        ]))
                    }
                }
            }
            self.store.kick()
        }
    }
}

extension RequestError {
    /// The last line of a connection whose consumer an operator deleted.
    static func consumerDeleted(_ name: String) -> RequestError {
        RequestError(code: "consumer_deleted", title: "Consumer “\(clipped(name))” was deleted by an operator",
                     detail: "Its acknowledged cursor is removed and this connection is closed. Subscribing under the name again starts a new consumer: from the tail, or from \"earliest\".")
    }

    /// A subscribe or ack of a name whose deletion is under way.
    static func consumerBeingDeleted(_ name: String) -> RequestError {
        RequestError(code: "consumer_deleted", title: "Consumer “\(clipped(name))” is being deleted",
                     detail: "An operator's deleteConsumer is removing its cursor. Subscribe again once it is done (a new consumer starts from the tail, or from \"earliest\").")
    }
}
