// Where a router sends a request (SPEC §9, routing): to the user's partition, split across partitions, or to every one.

/// Where a request goes, decided from its op and fields alone.
public enum RequestRoute: Equatable, Sendable {
    /// One partition's owner: a user's request, or one whose fields the owner must judge (a
    /// request malformed for routing goes to partition 0, whose service answers it as a single
    /// instance would).
    case partition(Int)
    /// A fan-out whose users live in several partitions: one sub-request per partition (ascending),
    /// with that partition's users in request order; one reply after every partition answered.
    case split([Part])
    /// Every partition, one reply after all answered: app registrations and the manual clock
    /// (recorded in every partition's log, SPEC §9), a withdraw without its user, consumer
    /// administration.
    case everyPartition
    /// A subscription: one stream from every partition's owner.
    case subscribe
    /// A consumer's ack of the partition it names (0 when it names none).
    case ack(partition: Int)
    /// Answered by the router itself.
    case router

    public struct Part: Equatable, Sendable {
        public var partition: Int
        public var users: [String]
        public init(partition: Int, users: [String]) {
            self.partition = partition
            self.users = users
        }
    }

    /// The route of `op` with `body` (its members but `op` and `rid`) on `partitioning`.
    public static func of(_ op: Op, body: JSONValue, partitioning: Partitioning) -> RequestRoute {
        switch op {
        case .hello, .ping, .stats:
            return .router
        case .subscribe:
            return .subscribe
        case .ack:
            if let p = body["partition"]?.intValue, p >= 0, p < Int64(partitioning.count) { return .ack(partition: Int(p)) }
            return .ack(partition: 0)
        case .registerApp, .clock, .consumers, .deleteConsumer:
            return .everyPartition
        case .withdraw:
            if let user = body["user"]?.stringValue { return .partition(partitioning.partition(of: user)) }
            return body["user"] == nil ? .everyPartition : .partition(0)
        case .submit:
            if let user = body["user"]?.stringValue, body["users"] == nil { return .partition(partitioning.partition(of: user)) }
            guard body["user"] == nil, let list = body["users"]?.arrayValue else { return .partition(0) }
            var users: [String] = []
            users.reserveCapacity(list.count)
            for u in list {
                guard let s = u.stringValue else { return .partition(0) }
                users.append(s)
            }
            guard let first = users.first else { return .partition(0) }
            let p0 = partitioning.partition(of: first)
            var byPartition: [Int: [String]] = [:]
            for u in users { byPartition[partitioning.partition(of: u), default: []].append(u) }
            if byPartition.count == 1 { return .partition(p0) }
            return .split(byPartition.keys.sorted().map { Part(partition: $0, users: byPartition[$0]!) })
        case .authorization, .settings, .provisionalKeep, .provisionalTurnOff, .summarySchedule, .focusDefine,
             .focusOn, .focusOff, .mute, .snooze, .opened, .badgeClear, .erase:
            if let user = body["user"]?.stringValue { return .partition(partitioning.partition(of: user)) }
            return .partition(0)
        }
    }
}
