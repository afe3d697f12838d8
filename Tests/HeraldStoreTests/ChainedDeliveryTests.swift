// Two writers store batches of one delivery stream at the same time (`append(deliveries:after:)`),
// against a real PostgreSQL: cursors stay gap-free and in commit order, and a batch whose
// predecessor rolled back stores nothing.
import Foundation
import HeraldCore
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct ChainedDeliveryTests {
    /// Drives several writers with poll(2) until all are idle (or 30 s pass).
    static func runUntilIdle(_ writers: [GroupCommitWriter]) -> Bool {
        let deadline = Date().addingTimeInterval(30)
        for w in writers { w.pump() }
        while writers.contains(where: { !$0.isIdle && $0.failure == nil }) {
            if Date() > deadline { return false }
            for w in writers where !w.isIdle && w.failure == nil {
                if PGPoll.wait(socket: w.socket, read: true, write: w.wantsWrite, timeoutMilliseconds: 5) {
                    if w.wantsWrite { w.socketWritable() }
                    w.socketReadable()
                }
            }
        }
        return true
    }

    static func writers(_ url: String) throws -> (GroupCommitWriter, GroupCommitWriter) {
        let a = try CopyAppendTests.writer(url), b = try CopyAppendTests.writer(url)
        #expect(runUntilIdle([a, b]))
        return (a, b)
    }

    static func rows(_ range: ClosedRange<Int64>) -> [DeliveryRow] { range.map { CopyAppendTests.delivery($0) } }

    @Test func twoWritersStoreChainedBatchesAtOnceAndTheLaterCommitsAfterTheEarlier() throws {
        let url = try TestPostgres.freshDatabase()
        let (a, b) = try Self.writers(url)
        var heard: [String] = []
        let probe = try PGConnection.connect(url)
        var aVisibleWhenBCommitted: Int64 = -1
        // Two large batches, so both COPYs run at once; B (cursors 2,001 …) is sent first, yet it
        // waits for A (1 … 2,000) and commits after it: had its head check run before A's commit,
        // the head would not have been at 2,000 and B would have failed.
        b.append(deliveries: Self.rows(2_001...3_000), after: 2_000) { result in
            heard.append("B \(((try? result.get()) ?? []).first ?? -1)")
            aVisibleWhenBCommitted = (try? probe.execute("SELECT count(*) FROM deliveries WHERE cursor <= 2000").int64(0, 0)) ?? -1
        }
        a.append(deliveries: Self.rows(1...2_000), after: 0) { heard.append("A \(((try? $0.get()) ?? []).first ?? -1)") }
        #expect(Self.runUntilIdle([a, b]))
        #expect(Set(heard) == ["A 1", "B 2001"])
        #expect(aVisibleWhenBCommitted == 2_000, "A had committed when B did")
        #expect(a.deliveriesChained == 2_000 && b.deliveriesChained == 1_000)
        let conn = try PGConnection.connect(url)
        #expect(try conn.execute("SELECT cursor FROM delivery_heads WHERE partition = 0").int64(0, 0) == 3_000)
        #expect(try conn.execute("SELECT count(*) FROM deliveries").int64(0, 0) == 3_000)
    }

    @Test func aChainedBatchWhoseHeadIsElsewhereStoresNothingAndFailsRetryably() throws {
        let url = try TestPostgres.freshDatabase()
        let (a, _) = try Self.writers(url)
        var outcome: Result<[Int64], StoreError>?
        a.append(deliveries: Self.rows(1...3), after: 7) { outcome = $0 }   // the head is at 0
        #expect(Self.runUntilIdle([a]))
        guard case .failure(let error) = outcome else { Issue.record("stored at a wrong base: \(String(describing: outcome))"); return }
        #expect(error.isRetryable, "\(error)")
        #expect("\(error)".contains("the delivery head is not at 7"))
        #expect(a.failure == nil, "the writer stays usable")
        let conn = try PGConnection.connect(url)
        #expect(try conn.execute("SELECT count(*) FROM deliveries").int64(0, 0) == 0)
        #expect(try conn.execute("SELECT cursor FROM delivery_heads WHERE partition = 0").int64(0, 0) == 0)
    }

    @Test func whenTheEarlierBatchRollsBackTheLaterOneStoresNothingEither() throws {
        // A fails (a NUL byte, refused by the protocol); B, chained after A, must not commit
        // cursors 4 … with 1 … 3 missing.
        let url = try TestPostgres.freshDatabase()
        let (a, b) = try Self.writers(url)
        var bad = Self.rows(1...3)
        bad[1].bodyBytes = Array("{\"kind\":\"x\u{0}y\"}".utf8)
        var heard: [String: Bool] = [:]
        a.append(deliveries: bad, after: 0) { heard["A"] = (try? $0.get()) != nil }
        b.append(deliveries: Self.rows(4...5), after: 3) { heard["B"] = (try? $0.get()) != nil }
        #expect(Self.runUntilIdle([a, b]))
        #expect(heard == ["A": false, "B": false])
        let conn = try PGConnection.connect(url)
        #expect(try conn.execute("SELECT count(*) FROM deliveries").int64(0, 0) == 0, "no cursor after a gap")
        #expect(try conn.execute("SELECT cursor FROM delivery_heads WHERE partition = 0").int64(0, 0) == 0)
        // Appended again in order, they commit.
        a.append(deliveries: Self.rows(1...3), after: 0) { heard["A"] = (try? $0.get()) != nil }
        b.append(deliveries: Self.rows(4...5), after: 3) { heard["B"] = (try? $0.get()) != nil }
        #expect(Self.runUntilIdle([a, b]))
        #expect(heard == ["A": true, "B": true])
        #expect(try conn.execute("SELECT count(*) FROM deliveries").int64(0, 0) == 5)
    }
}
