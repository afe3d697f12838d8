// The consumer registry: a name's connections form a group, one streams, a closing connection leaves it.
import Glibc
import HeraldCore
@testable import HeraldRuntime
import Testing

@Suite struct ConsumerRegistryTests {
    /// Connections on socket pairs of one loop (the far ends kept open), never started.
    final class Connections {
        let loop = EventLoop()
        let delegate = ConnectionDelegateRef()
        var made: [ClientConnection] = []
        var farEnds: [Int32] = []

        func make() -> ClientConnection {
            var fds: [Int32] = [0, 0]
            precondition(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
            farEnds.append(fds[1])
            let c = ClientConnection(id: UInt64(made.count + 1), fd: fds[0], loop: loop,
                                     session: ClientSession(tokens: TokenTable(), serverName: "t"),
                                     maxLineBytes: 1024, delegate: delegate)!
            made.append(c)
            return c
        }

        deinit { for fd in farEnds { close(fd) } }
    }

    @Test func aSecondConnectionJoinsTheGroupAndTheNewestStreamsTheOnlyPartition() {
        let connections = Connections()
        let (a, b) = (connections.make(), connections.make())
        var registry = ConsumerRegistry()
        let (group, first) = registry.joined("push", member: "001-x-1", connection: a, filter: nil, partition: 0, partitionCount: 1, acked: 7)
        #expect(first == .init(revoked: nil, assigned: "001-x-1", generation: 1))
        let stream = ConsumerStream(name: "push", connection: a, position: 7)
        registry.streaming(stream)
        let (same, second) = registry.joined("push", member: "002-x-2", connection: b, filter: nil, partition: 0, partitionCount: 1, acked: 5)
        #expect(same === group && group.acked == 7, "one group a name; its acknowledged cursor never goes back")
        #expect(second == .init(revoked: "001-x-1", assigned: "002-x-2", generation: 2))
        registry.stopStreaming("push")
        #expect(stream.connection == nil && !registry.isCurrent(stream) && registry.isSubscribed("push") && registry.count == 1)
        // The revoked stream, woken late, unregisters nothing.
        registry.streamEnded(stream)
        #expect(registry.isSubscribed("push"))
    }

    /// A router that lost its link subscribes the same member again, possibly before this service
    /// saw the old link close: the member's stream moves to the new connection, and the old
    /// connection's close later changes nothing.
    @Test func aStreamingMemberSubscribingAgainOnANewConnectionStreamsThereAndTheOldCloseIsIgnored() {
        let connections = Connections()
        let (old, new) = (connections.make(), connections.make())
        var registry = ConsumerRegistry()
        _ = registry.joined("push", member: "001-x-1", connection: old, filter: nil, partition: 0, partitionCount: 1, acked: 0)
        let (_, again) = registry.joined("push", member: "001-x-1", connection: new, filter: nil, partition: 0, partitionCount: 1, acked: 0)
        #expect(again == .init(revoked: "001-x-1", assigned: "001-x-1", generation: 1))
        #expect(registry.connectionClosing(old) == nil && registry.isSubscribed("push"))
        #expect(registry.connectionClosing(new)?.handover.assigned == nil)
    }

    @Test func aClosingConnectionLeavesOnlyItsOwnGroupAndHandsItsPartitionOn() {
        let connections = Connections()
        let (a, b, c) = (connections.make(), connections.make(), connections.make())
        var registry = ConsumerRegistry()
        _ = registry.joined("push", member: "001-x-1", connection: a, filter: nil, partition: 0, partitionCount: 1, acked: 0)
        _ = registry.joined("push", member: "002-x-2", connection: b, filter: nil, partition: 0, partitionCount: 1, acked: 0)
        _ = registry.joined("mail", member: "003-x-3", connection: c, filter: nil, partition: 0, partitionCount: 1, acked: 0)
        let left = registry.connectionClosing(b)
        #expect(left?.name == "push" && left?.handover == .init(revoked: "002-x-2", assigned: "001-x-1", generation: 3))
        #expect(registry.connectionClosing(a)?.handover.assigned == nil)
        #expect(!registry.isSubscribed("push") && registry.isSubscribed("mail") && registry.count == 1)
        #expect(registry.maxQueuedBytes == 0)
    }
}
