// One reply for a request a router sent to several partitions: a split fan-out or an op every partition records.

/// Merges the replies of a request sent to several partitions (`RequestRoute.split`,
/// `.everyPartition`) into the one reply its client gets (SPEC §9: one request, one ack after every
/// partition committed).
public enum ReplyMerge {
    /// Whether every partition must succeed for the request to succeed (`all`), or one is enough
    /// (`any`: deleting a consumer, whose rows one partition's service deletes for all; a withdraw
    /// without its user, which only the notification's partition knows).
    public enum Policy: Sendable { case all, any }

    public static func policy(for op: Op) -> Policy {
        switch op {
        case .deleteConsumer, .withdraw: .any
        default: .all
        }
    }

    /// The merged reply, with the client's `rid`. `replies` are (partition, reply) in ascending
    /// partition order. A failure under `all` is the lowest partition's failure: the client sends
    /// the request again, and partitions that committed answer it as a duplicate.
    public static func merge(op: Op, rid: JSONValue?, _ replies: [(partition: Int, reply: JSONValue)]) -> JSONValue {
        let ok = replies.filter { $0.reply["ok"] == .bool(true) }
        let policy = policy(for: op)
        if ok.isEmpty || (policy == .all && ok.count < replies.count) {
            var failed = replies.first { $0.reply["ok"] != .bool(true) }?.reply ?? .object([:])
            failed = with(rid: rid, failed)
            return failed
        }
        var fields: [String: JSONValue] = [:]
        if case .object(let first) = ok[0].reply { fields = first }
        fields["rid"] = nil
        switch op {
        case .consumers:
            fields["consumers"] = .array(mergeConsumers(ok.map(\.reply)))
            fields["ephemeral"] = .array(ok.flatMap { $0.reply["ephemeral"]?.arrayValue ?? [] })
        default:
            // Counts add up; the partitions each committed are listed.
            for key in ["events", "appended", "fired"] where fields[key] != nil {
                fields[key] = .int(ok.reduce(0) { $0 + ($1.reply[key]?.intValue ?? 0) })
            }
            if fields["appended"] != nil {
                let appended = fields["appended"]?.intValue ?? 0
                fields["duplicate"] = appended == 0 ? .bool(true) : nil
            }
            var warnings: [JSONValue] = []
            for r in ok { for w in r.reply["warnings"]?.arrayValue ?? [] where !warnings.contains(w) { warnings.append(w) } }
            if fields["warnings"] != nil || !warnings.isEmpty { fields["warnings"] = .array(warnings) }
            fields["partitions"] = .array(ok.map { r in
                var o: [String: JSONValue] = ["partition": .int(Int64(r.partition))]
                for key in ["seq", "events", "appended", "duplicate"] { if let v = r.reply[key] { o[key] = v } }
                return .object(o)
            })
        }
        return with(rid: rid, .object(fields))
    }

    /// Each consumer once, its partitions' positions from every partition's reply, its lag summed.
    static func mergeConsumers(_ replies: [JSONValue]) -> [JSONValue] {
        var order: [String] = []
        var byName: [String: [String: JSONValue]] = [:]
        for reply in replies {
            for c in reply["consumers"]?.arrayValue ?? [] {
                guard case .object(let o) = c, let name = o["consumer"]?.stringValue else { continue }
                if var known = byName[name] {
                    known["partitions"] = .array((known["partitions"]?.arrayValue ?? []) + (o["partitions"]?.arrayValue ?? []))
                    known["lag"] = .int((known["lag"]?.intValue ?? 0) + (o["lag"]?.intValue ?? 0))
                    known["members"] = .array(mergeMembers((known["members"]?.arrayValue ?? []) + (o["members"]?.arrayValue ?? [])))
                    if let a = o["ackedAt"]?.stringValue, a > (known["ackedAt"]?.stringValue ?? "") { known["ackedAt"] = .string(a) }
                    byName[name] = known
                } else {
                    order.append(name)
                    byName[name] = o
                }
            }
        }
        return order.sorted().map { .object(byName[$0]!) }
    }

    /// A group member once, with the partitions it streams from every partition's reply (each
    /// partition's service reports the members it knows, all of them, and which one it streams
    /// to). What each partition knows of the member's link (connection, positions) is dropped.
    static func mergeMembers(_ members: [JSONValue]) -> [JSONValue] {
        var order: [String] = []
        var byID: [String: [String: JSONValue]] = [:]
        for m in members {
            guard case .object(let o) = m, let id = o["member"]?.stringValue else { continue }
            var merged = byID[id] ?? ["member": .string(id), "partitions": .array([])]
            if byID[id] == nil { order.append(id) }
            if let filter = o["filter"] { merged["filter"] = filter }
            let partitions = (merged["partitions"]?.arrayValue ?? []) + (o["partitions"]?.arrayValue ?? [])
            merged["partitions"] = .array(partitions.sorted { ($0.intValue ?? 0) < ($1.intValue ?? 0) })
            byID[id] = merged
        }
        return order.sorted(by: >).map { .object(byID[$0]!) }
    }

    public static func with(rid: JSONValue?, _ reply: JSONValue) -> JSONValue {
        guard case .object(var o) = reply else { return reply }
        o["rid"] = rid
        return .object(o)
    }
}
