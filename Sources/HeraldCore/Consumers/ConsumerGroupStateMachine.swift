// A consumer group on one partition: which member streams the partition, under which generation.

/// The connections subscribed under one durable consumer name, as one partition's service sees
/// them (SPEC §9, consumers). Every member subscribes to every partition, so each partition's
/// service knows the whole group and picks its streamer alone, by the same rule everywhere: the
/// members sorted by id, newest first (ids begin with their join time), and partition `p` to the
/// member at `p mod m`. The partitions are so divided within one of each other among the members,
/// with no coordinator and no shared table; on one partition the newest subscriber streams, so a
/// consumer that reconnects takes over at once from a connection not yet known to be dead.
///
/// Each change of streamer bumps the generation. The streamer starts from the acknowledged
/// cursor; an ack from any other member is refused (it was fenced when the partition moved), so
/// what it had not acknowledged is delivered again to the new streamer: nothing is skipped, and
/// duplicates come only after the last ack.
public struct ConsumerGroupStateMachine: Sendable, Equatable {
    /// A change of streamer: stop `revoked`'s stream (if any), start `assigned`'s (if any) from
    /// the acknowledged cursor, under `generation`.
    public struct Handover: Sendable, Equatable {
        public let revoked: String?
        public let assigned: String?
        public let generation: Int64
        public init(revoked: String?, assigned: String?, generation: Int64) {
            self.revoked = revoked; self.assigned = assigned; self.generation = generation
        }
    }

    public enum AckVerdict: Sendable, Equatable {
        case accept
        /// The ack comes from a member that does not stream the partition now.
        case refuse(streamer: String?, generation: Int64)
    }

    public let partition: Int
    public let partitionCount: Int
    /// Member ids, newest first.
    public private(set) var members: [String] = []
    public private(set) var streamer: String?
    public private(set) var generation: Int64 = 0

    public init(partition: Int, partitionCount: Int) {
        precondition(partitionCount > 0 && partition >= 0 && partition < partitionCount)
        self.partition = partition; self.partitionCount = partitionCount
    }

    /// The member that streams `partition` among `members` (newest first).
    public static func streamer(of partition: Int, among members: [String]) -> String? {
        members.isEmpty ? nil : members[partition % members.count]
    }

    /// A member subscribed (again: a known id changes nothing).
    public mutating func memberJoined(_ id: String) -> Handover? {
        guard !members.contains(id) else { return nil }
        members.append(id)
        members.sort(by: >)
        return rebalanced()
    }

    /// A member's connection closed.
    public mutating func memberLeft(_ id: String) -> Handover? {
        guard let i = members.firstIndex(of: id) else { return nil }
        members.remove(at: i)
        return rebalanced()
    }

    /// Whether an ack from `member` may move the cursor. An ack that names no member (an
    /// operator's, on a connection that streams nothing) is accepted.
    public func ackReceived(from member: String?) -> AckVerdict {
        guard let member, let streamer, member != streamer else { return .accept }
        return .refuse(streamer: streamer, generation: generation)
    }

    private mutating func rebalanced() -> Handover? {
        let next = Self.streamer(of: partition, among: members)
        guard next != streamer else { return nil }
        let revoked = streamer
        streamer = next
        generation += 1
        return Handover(revoked: revoked, assigned: next, generation: generation)
    }

    /// A member id: the join time (milliseconds, fixed width so ids sort by it), then where it
    /// joined and a serial (fixed width too: two joins of one millisecond there sort by it), so
    /// that ids made by different instances never collide.
    public static func memberID(joinedAtMilliseconds: Int64, instance: String, serial: UInt64) -> String {
        func padded(_ n: String, _ width: Int) -> String { String(repeating: "0", count: max(0, width - n.count)) + n }
        return padded(String(max(joinedAtMilliseconds, 0)), 15) + "-" + instance + "-" + padded(String(serial), 10)
    }
}
