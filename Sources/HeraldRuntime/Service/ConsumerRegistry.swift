// The subscribed consumers: each durable name a group of connections, one of which streams; and the ephemeral streams.
import HeraldCore

/// The connections subscribed under one durable name on this service's partition, and the one
/// that streams it (`ConsumerGroupStateMachine` picks it).
final class ConsumerGroup {
    struct Member {
        let connection: Unretained<ClientConnection>
        let filter: ConsumerFilter?
    }

    var machine: ConsumerGroupStateMachine
    var members: [String: Member] = [:]
    /// The highest cursor known to be acknowledged (stored): where a new streamer starts.
    var acked: Int64

    init(partition: Int, partitionCount: Int, acked: Int64) {
        machine = ConsumerGroupStateMachine(partition: partition, partitionCount: partitionCount)
        self.acked = acked
    }
}

/// The groups and streams by consumer name, and the ephemeral streams.
struct ConsumerRegistry {
    /// The stream of each durable name that has a streamer now.
    private(set) var streams: [String: ConsumerStream] = [:]
    /// Every durable name with a connection subscribed here.
    private(set) var groups: [String: ConsumerGroup] = [:]
    /// Names whose `deleteConsumer` is under way: their acks and subscribes are refused meanwhile.
    var deleting: Set<String> = []
    /// Ephemeral streams (no durable cursor, in no group), by their connection.
    private(set) var ephemeral: [ObjectIdentifier: ConsumerStream] = [:]

    /// Every stream to wake when deliveries commit.
    var allStreams: [ConsumerStream] { Array(streams.values) + Array(ephemeral.values) }

    /// An ephemeral stream starts on its connection.
    mutating func subscribedEphemeral(_ stream: ConsumerStream) {
        guard let c = stream.connection else { return }
        ephemeral[ObjectIdentifier(c)] = stream
    }

    /// `connection` joins `name`'s group as `member` (the group made at `acked` if it had no
    /// member here yet). Returns the group and the change of streamer the join makes.
    mutating func joined(_ name: String, member: String, connection: ClientConnection, filter: ConsumerFilter?,
                         partition: Int, partitionCount: Int, acked: Int64) -> (ConsumerGroup, ConsumerGroupStateMachine.Handover?) {
        let group: ConsumerGroup
        if let g = groups[name] {
            g.acked = max(g.acked, acked)
            group = g
        } else {
            group = ConsumerGroup(partition: partition, partitionCount: partitionCount, acked: acked)
            groups[name] = group
        }
        connection.consumerName = name
        connection.consumerMember = member
        let before = group.members[member]?.connection.object
        group.members[member] = ConsumerGroup.Member(connection: connection.unretained, filter: filter)
        if let handover = group.machine.memberJoined(member) { return (group, handover) }
        // A known member on a new connection (its router subscribed again before this service saw
        // the old link close): if it streams, its stream moves to the new connection.
        if before !== connection, group.machine.streamer == member {
            return (group, .init(revoked: member, assigned: member, generation: group.machine.generation))
        }
        return (group, nil)
    }

    /// `name`'s cursor is acknowledged through `cursor` (accepted, or stored): a new streamer of
    /// its group starts after it.
    func acknowledged(_ name: String, through cursor: Int64) {
        if let g = groups[name] { g.acked = max(g.acked, cursor) }
    }

    /// `deleteConsumer`: the name's group ends; its members' connections are returned, to be told
    /// why and closed.
    mutating func deleted(_ name: String) -> [ClientConnection] {
        if let s = streams.removeValue(forKey: name) { s.connection = nil }
        guard let g = groups.removeValue(forKey: name) else { return [] }
        return g.members.values.compactMap { $0.connection.object }
    }

    /// How many durable consumers have a member here.
    var count: Int { groups.count }

    /// Whether a consumer of this name is subscribed (on any connection).
    func isSubscribed(_ name: String) -> Bool { groups[name] != nil }

    /// Whether `stream` is still its name's streamer (false once the partition moved to another
    /// member, or the connection closed).
    func isCurrent(_ stream: ConsumerStream) -> Bool {
        if stream.ephemeral { return stream.connection.map { ephemeral[ObjectIdentifier($0)] === stream } ?? false }
        return streams[stream.name] === stream
    }

    /// `stream` streams its name now.
    mutating func streaming(_ stream: ConsumerStream) { streams[stream.name] = stream }

    /// The name's stream ends (its streamer was revoked): whatever callback of it is still armed
    /// finds it without a connection.
    mutating func stopStreaming(_ name: String) {
        if let s = streams.removeValue(forKey: name) { s.connection = nil }
    }

    /// The connection is closing: its ephemeral stream ends, and it leaves its group. Returns the
    /// change of streamer that makes, for the service to carry out.
    mutating func connectionClosing(_ connection: ClientConnection) -> (name: String, handover: ConsumerGroupStateMachine.Handover)? {
        ephemeral[ObjectIdentifier(connection)] = nil
        guard let name = connection.consumerName, let member = connection.consumerMember, let g = groups[name],
              g.members[member]?.connection.object === connection else { return nil }
        g.members[member] = nil
        let handover = g.machine.memberLeft(member)
        if g.members.isEmpty { groups[name] = nil }
        return handover.map { (name, $0) }
    }

    /// The stream's connection is gone: its registration ends — only its own (a stream revoked
    /// may still be woken, by a catch-up read completing, and must not unregister its successor).
    mutating func streamEnded(_ stream: ConsumerStream) {
        if stream.ephemeral {
            ephemeral = ephemeral.filter { $0.value !== stream }
        } else if isCurrent(stream) {
            streams[stream.name] = nil
        }
    }

    /// The most output bytes queued in the server for one consumer (`stats`).
    var maxQueuedBytes: Int { allStreams.map { $0.connection?.outputBytes ?? 0 }.max() ?? 0 }
}
