// The connection table: ids, the limit, the oldest connection without hello evicted first, closed ones freed later.
import HeraldCore
@testable import HeraldRuntime
import Testing

@Suite struct ConnectionTableTests {
    typealias Connections = ConsumerRegistryTests.Connections

    static func accept(_ made: Connections, into table: inout ConnectionTable) -> ClientConnection {
        let c = made.make()
        // The table hands out the ids; the test's connections are numbered alike (1, 2, …).
        #expect(table.takeId() == c.id)
        table.accepted(c)
        #expect(table.open[c.id] === c)
        return c
    }

    @Test func nothingIsEvictedBelowTheLimit() {
        let made = Connections()
        var table = ConnectionTable()
        table.limit = 3
        let a = Self.accept(made, into: &table)
        #expect(table.count == 1 && !table.isFull)
        #expect(table.nextToEvict(now: a.acceptedAt + 60_000, helloGrace: 1_000) == nil)
    }

    @Test func atTheLimitTheOldestWithoutHelloGoesOnceOldEnough() {
        let made = Connections()
        var table = ConnectionTable()
        table.limit = 2
        let a = Self.accept(made, into: &table)
        let b = Self.accept(made, into: &table)
        #expect(table.isFull)
        // Too young: none goes (the rest were accepted later).
        #expect(table.nextToEvict(now: a.acceptedAt + 999, helloGrace: 1_000) == nil)
        #expect(table.nextToEvict(now: b.acceptedAt + 1_000, helloGrace: 1_000) === a)
        table.evicted()
        #expect(table.evictedBeforeHello == 1)
        // Until its close comes back, it still holds its slot: the next oldest is offered.
        #expect(table.nextToEvict(now: b.acceptedAt + 1_000, helloGrace: 1_000) === b)
        table.closed(a)
        #expect(table.count == 1 && !table.isFull && table.open[a.id] == nil)
        #expect(table.nextToEvict(now: b.acceptedAt + 1_000, helloGrace: 1_000) == nil)
    }

    @Test func aClosingConnectionIsNotOfferedForEviction() {
        let made = Connections()
        var table = ConnectionTable()
        table.limit = 1
        let a = Self.accept(made, into: &table)
        a.close(reason: "test")
        #expect(a.isClosing)
        #expect(table.nextToEvict(now: a.acceptedAt + 60_000, helloGrace: 1_000) == nil)
    }

    @Test func closedConnectionsKeepTheirRefusedHellosInTheCount() {
        let made = Connections()
        var table = ConnectionTable()
        table.limit = 10
        let a = Self.accept(made, into: &table)
        #expect(table.hellosRefused == 0)
        table.closed(a)
        table.closed(a)  // a second report changes nothing
        #expect(table.count == 0 && table.hellosRefused == 0)
        table.freeClosed()
        #expect(table.takeId() == 2)
    }
}
