// The consumer registry: one stream per name, a subscribe elsewhere takes the name over, a closing connection's streams end.
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

    @Test func aNameStreamsOnOneConnectionAtATime() {
        let connections = Connections()
        let (a, b) = (connections.make(), connections.make())
        var registry = ConsumerRegistry()
        let first = ConsumerStream(name: "push", connection: a, position: 0)
        #expect(registry.subscribed(first) == nil)
        #expect(registry.isSubscribed("push") && registry.isCurrent(first) && registry.count == 1)
        // A subscribe of the same name elsewhere takes it over; the first is cut off, its connection returned.
        let second = ConsumerStream(name: "push", connection: b, position: 5)
        #expect(registry.subscribed(second) === a)
        #expect(first.connection == nil && registry.isCurrent(second) && !registry.isCurrent(first) && registry.count == 1)
        // The replaced stream, woken late, does not unregister its successor.
        registry.streamEnded(first)
        #expect(registry.isCurrent(second))
        registry.streamEnded(second)
        #expect(!registry.isSubscribed("push") && registry.count == 0)
    }

    @Test func aSubscribeAgainOnTheSameConnectionDisplacesNothing() {
        let connections = Connections()
        let a = connections.make()
        var registry = ConsumerRegistry()
        let first = ConsumerStream(name: "push", connection: a, position: 0)
        _ = registry.subscribed(first)
        let again = ConsumerStream(name: "push", connection: a, position: 3)
        #expect(registry.subscribed(again) == nil)
        #expect(first.connection === a && registry.isCurrent(again))
    }

    @Test func aClosingConnectionEndsOnlyItsOwnStreams() {
        let connections = Connections()
        let (a, b) = (connections.make(), connections.make())
        var registry = ConsumerRegistry()
        _ = registry.subscribed(ConsumerStream(name: "push", connection: a, position: 0))
        _ = registry.subscribed(ConsumerStream(name: "mail", connection: b, position: 0))
        registry.connectionClosing(a)
        #expect(!registry.isSubscribed("push") && registry.isSubscribed("mail") && registry.count == 1)
        #expect(registry.maxQueuedBytes == 0)
    }
}
