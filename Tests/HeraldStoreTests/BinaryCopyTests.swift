// A COPY batch encoded before its positions are claimed, then moved to them, is byte for byte the
// batch encoded at its positions.
@testable import HeraldStore
import HeraldCore
import Testing

@Suite struct BinaryCopyTests {
    /// Events with every optional field absent in some rows (NULL fields have no bytes to skip).
    static let events: [EventRow] = (1...40).map { i in
        var row = CopyAppendTests.event(i, user: "user-\(i % 7)")
        if i % 5 == 0 { row.user = nil }
        if i % 3 == 0 { row.app = nil; row.notificationId = nil }
        return row
    }

    @Test func rebasedEventDataEqualsEventDataEncodedAtTheClaimedPositions() {
        for base: Int64 in [0, 1, 41, 1 << 33, Int64(Int32.max) + 7] {
            var data = EventCopy.encode(Self.events, base: 0)
            BinaryCopy.rebase(&data, by: base)
            #expect(data == EventCopy.encode(Self.events, base: base), "base \(base)")
        }
    }

    @Test func rebasedDeliveryDataEqualsDeliveryDataEncodedAtTheClaimedCursors() {
        let rows = (1...40).map { i -> DeliveryRow in
            var row = CopyAppendTests.delivery(Int64(i), user: "user-\(i % 3)")
            if i % 4 == 0 { row.app = nil; row.notificationId = nil }
            return row
        }
        for base: Int64 in [0, 3, 1_000_000_007] {
            var data = DeliveryCopy.encode(rows, base: 0)
            BinaryCopy.rebase(&data, by: base)
            #expect(data == DeliveryCopy.encode(rows, base: base), "base \(base)")
        }
    }

    /// Each noted offset is where a tuple's position value lies: right after its field count and
    /// its int8 length, at the tuple's start (the tuples follow each other from the header on).
    @Test func thePositionOffsetsPointAtEachTuplesPosition() {
        let data = EventCopy.encode(Self.events, base: 0)
        #expect(data.positionOffsets.count == Self.events.count)
        #expect(data.positionOffsets.first == Int32(BinaryCopy.headerSize + 2 + 4))
        for (i, offset) in data.positionOffsets.enumerated() {
            let at = Int(offset)
            let value = data.bytes[at..<at + 8].reduce(Int64(0)) { $0 << 8 | Int64($1) }
            #expect(value == Int64(i + 1), "tuple \(i)")
        }
    }

    @Test func anEmptyBatchHasNothingToMove() {
        var data = EventCopy.encode([], base: 0)
        BinaryCopy.rebase(&data, by: 99)
        #expect(data == EventCopy.encode([], base: 99))
        #expect(data.positionOffsets.isEmpty)
    }
}

@Suite struct BinaryCopyBatchesTests {
    /// Cut into batches, the rows are the same rows in the same order, each batch a payload
    /// PostgreSQL's format allows (header, tuples, trailer), NULL fields included.
    @Test func batchesHoldEveryRowOnceInOrderAsWholePayloads() throws {
        let rows = (0..<7).map { i in
            EventRow(user: i == 3 ? nil : "user-\(i)", type: "submit", app: "com.example.mail", notificationId: "n\(i)",
                     body: #"{"title":"\#(i)"}"#, engineTime: Instant(millisecondsSinceEpoch: 1_780_000_000_000 + Int64(i)))
        }
        let whole = EventCopy.encode(rows, base: 100).bytes
        let batches = try #require(BinaryCopyBatches.split([Array(whole.prefix(50)), Array(whole.dropFirst(50))], rowsPerBatch: 3))
        #expect(batches.count == 3)
        for (i, batch) in batches.enumerated() {
            let expected = EventCopy.encode(Array(rows[(i * 3)..<min(rows.count, i * 3 + 3)]), base: 100 + Int64(i * 3)).bytes
            #expect(batch.payload == expected && batch.rows == min(3, rows.count - i * 3), "batch \(i)")
        }
        #expect(BinaryCopyBatches.split([Array("not binary copy data at all".utf8)], rowsPerBatch: 3) == nil)
        #expect(BinaryCopyBatches.split([Array(whole.dropLast(9))], rowsPerBatch: 3) == nil, "a cut tuple")
    }
}
