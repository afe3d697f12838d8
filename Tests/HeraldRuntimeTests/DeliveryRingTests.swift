// The in-memory ring of committed deliveries: bounded in count and bytes, restarted at a gap, the head only forward.
@testable import HeraldRuntime
import Testing

@Suite struct DeliveryRingTests {
    static func body(_ n: Int, bytes: Int = 4) -> [UInt8] { Array(repeating: UInt8(truncatingIfNeeded: n), count: bytes) }

    @Test func aRestoredRingStartsEmptyAfterTheHead() {
        var ring = DeliveryRing(capacity: 4, maxBytes: 1_000)
        ring.restored(head: 41)
        #expect(ring.head == 41 && ring.firstCursor == 42 && ring.isEmpty && ring.bytes == 0)
        ring.committed(Self.body(42), cursor: 42)
        #expect(ring.head == 42 && ring.firstCursor == 42 && ring.count == 1 && ring.bodies[0] == Self.body(42))
    }

    @Test func theOldestGoPastTheCapacity() {
        var ring = DeliveryRing(capacity: 3, maxBytes: 1_000)
        for cursor in 1...5 { ring.committed(Self.body(cursor), cursor: Int64(cursor)) }
        #expect(ring.count == 3 && ring.firstCursor == 3 && ring.head == 5 && ring.bytes == 12)
        #expect(Array(ring.bodies) == [Self.body(3), Self.body(4), Self.body(5)])
    }

    @Test func theOldestGoPastTheBytesButOneBodyIsAlwaysKept() {
        var ring = DeliveryRing(capacity: 100, maxBytes: 10)
        ring.committed(Self.body(1, bytes: 4), cursor: 1)
        ring.committed(Self.body(2, bytes: 4), cursor: 2)
        #expect(ring.count == 2 && ring.bytes == 8)
        ring.committed(Self.body(3, bytes: 4), cursor: 3)
        #expect(ring.count == 2 && ring.firstCursor == 2 && ring.bytes == 8)
        ring.committed(Self.body(4, bytes: 50), cursor: 4)
        #expect(ring.count == 1 && ring.firstCursor == 4 && ring.bytes == 50 && ring.head == 4)
    }

    @Test func aGapInTheCursorsRestartsTheRingThere() {
        var ring = DeliveryRing(capacity: 10, maxBytes: 1_000)
        ring.committed(Self.body(1), cursor: 1)
        ring.committed(Self.body(2), cursor: 2)
        // Another writer took cursors 3…6.
        ring.committed(Self.body(7), cursor: 7)
        #expect(ring.count == 1 && ring.firstCursor == 7 && ring.bytes == 4 && ring.head == 7)
    }

    @Test func aHeadFoundAheadEmptiesTheRingAndOneBehindChangesNothing() {
        var ring = DeliveryRing(capacity: 10, maxBytes: 1_000)
        for cursor in 1...3 { ring.committed(Self.body(cursor), cursor: Int64(cursor)) }
        let behind = ring.headFoundAhead(3)
        #expect(!behind && ring.count == 3 && ring.head == 3)
        let ahead = ring.headFoundAhead(9)
        #expect(ahead)
        #expect(ring.isEmpty && ring.bytes == 0 && ring.firstCursor == 10 && ring.head == 9)
        ring.committed(Self.body(10), cursor: 10)
        #expect(ring.count == 1 && ring.firstCursor == 10 && ring.head == 10)
    }
}
