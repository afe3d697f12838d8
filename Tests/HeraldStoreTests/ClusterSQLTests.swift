// SPEC §9 against PostgreSQL: instances' heartbeats, the cluster view, and takes that only one racer wins.
import Foundation
import HeraldCore
import HeraldStore
import HeraldTestSupport
import Synchronization
import Testing

@Suite struct ClusterSQLTests {
    /// A fresh database of `partitions` partitions.
    static func database(partitions: Int = 4) throws -> String {
        let url = try TestPostgres.freshDatabase()
        let conn = try PGConnection.connect(url)
        defer { conn.close() }
        _ = try conn.execute("SELECT herald_set_partitions($1::integer)", [String(partitions)])
        return url
    }

    static func row(_ conn: PGConnection, _ partition: Int) throws -> (epoch: Int64, owner: String?) {
        let r = try conn.execute("SELECT epoch, owner FROM partitions WHERE partition = $1::integer", [String(partition)])
        return (r.int64(0, 0)!, r.string(0, 1))
    }

    static func expire(_ conn: PGConnection, _ partition: Int) throws {
        _ = try conn.execute("UPDATE partitions SET lease_expires = now() - interval '1 second' WHERE partition = $1::integer",
                             [String(partition)])
    }

    /// The second of two racers for one expired partition waits for the first's row lock, then
    /// finds the epoch moved on and takes nothing: one winner, the epoch bumped once.
    @Test func twoSessionsRacingForAnExpiredPartitionOneWinsAndTheEpochMovesOnce() throws {
        let url = try Self.database()
        let first = try PGConnection.connect(url)
        let second = try PGConnection.connect(url)
        defer { first.close(); second.close() }
        let held = try #require(try ClusterSQL.take(first, partition: 0, instance: "old", address: "o:1", ttlMilliseconds: 60_000,
                                                    expectedEpoch: 0))
        try Self.expire(first, 0)

        _ = try first.execute("BEGIN")
        #expect(try ClusterSQL.take(first, partition: 0, instance: "a", address: "a:1", ttlMilliseconds: 60_000,
                                    expectedEpoch: held) == held + 1)
        #expect(second.send(ClusterSQL.take, ClusterSQL.takeParameters(partition: 0, instance: "b", address: "b:1",
                                                                        ttlMilliseconds: 60_000, expectedEpoch: held)))
        _ = second.flush()
        Thread.sleep(forTimeInterval: 0.2)
        _ = second.consumeInput()
        #expect(second.isBusy, "b's take waits for a's row lock")
        _ = try first.execute("COMMIT")
        var answer: PGResult?
        while answer == nil {
            _ = second.consumeInput()
            switch second.nextResult() {
            case .result(let r): answer = r
            case .wouldBlock: Thread.sleep(forTimeInterval: 0.01)
            case .endOfStatement: Issue.record("no result"); return
            }
        }
        while case .result = second.nextResult() {}
        #expect(answer.map(ClusterSQL.takenEpoch(from:)) == .some(nil), "b took nothing")
        #expect(try Self.row(first, 0) == (held + 1, "a"))

        // Racing on threads, many times: exactly one winner each time.
        for round in 0..<20 {
            try Self.expire(first, 0)
            let epoch = try Self.row(first, 0).epoch
            let winners = Mutex<[Int64]>([])
            DispatchQueue.concurrentPerform(iterations: 2) { i in
                guard let conn = try? PGConnection.connect(url) else { return }
                defer { conn.close() }
                if let e = try? ClusterSQL.take(conn, partition: 0, instance: "racer\(i)", address: "r:\(i)",
                                                ttlMilliseconds: 60_000, expectedEpoch: epoch) {
                    winners.withLock { $0.append(e) }
                }
            }
            #expect(winners.withLock { $0 } == [epoch + 1], "round \(round)")
            #expect(try Self.row(first, 0).epoch == epoch + 1)
        }
    }

    @Test func aLiveLeaseCannotBeTakenNorAStaleEpoch() throws {
        let url = try Self.database()
        let conn = try PGConnection.connect(url)
        defer { conn.close() }
        let a = try #require(try ClusterSQL.take(conn, partition: 1, instance: "a", address: "a:1", ttlMilliseconds: 60_000,
                                                 expectedEpoch: 0))
        #expect(try ClusterSQL.take(conn, partition: 1, instance: "b", address: "b:1", ttlMilliseconds: 60_000,
                                    expectedEpoch: a) == nil, "a's lease is live")
        try Self.expire(conn, 1)
        #expect(try ClusterSQL.take(conn, partition: 1, instance: "b", address: "b:1", ttlMilliseconds: 60_000,
                                    expectedEpoch: a - 1) == nil, "free, but the epoch read is stale")
        #expect(try Self.row(conn, 1) == (a, "a"))
        #expect(try ClusterSQL.take(conn, partition: 9, instance: "b", address: "b:1", ttlMilliseconds: 60_000,
                                    expectedEpoch: 0) == nil, "no such partition")
    }

    /// A released lease (a graceful hand-over) is takeable at once, without waiting for its expiry.
    @Test func aReleasedLeaseCanBeTakenAtOnce() throws {
        let url = try Self.database()
        let conn = try PGConnection.connect(url)
        defer { conn.close() }
        let a = try #require(try ClusterSQL.take(conn, partition: 2, instance: "a", address: "a:1", ttlMilliseconds: 60_000,
                                                 expectedEpoch: 0))
        _ = try conn.execute(LeaseSQL.release, ["2", String(a)])
        #expect(try ClusterSQL.take(conn, partition: 2, instance: "b", address: "b:1", ttlMilliseconds: 60_000,
                                    expectedEpoch: a) == a + 1)
        let view = try ClusterSQL.view(conn)
        #expect(view.partitions[2] == ClusterView.Partition(partition: 2, epoch: a + 1, owner: "b", address: "b:1", leaseLive: true))
    }

    /// The view judges liveness on the database's clock: an instance whose heartbeat expired is not
    /// live, a lease that expired is not; a left instance is gone.
    @Test func theViewCountsOnlyLiveHeartbeatsAndLiveLeases() throws {
        let url = try Self.database()
        let conn = try PGConnection.connect(url)
        defer { conn.close() }
        try ClusterSQL.heartbeat(conn, instance: "b", address: "b:1", ttlMilliseconds: 60_000)
        try ClusterSQL.heartbeat(conn, instance: "a", address: "a:1", ttlMilliseconds: 60_000)
        try ClusterSQL.heartbeat(conn, instance: "gone", address: "g:1", ttlMilliseconds: 1)
        _ = try ClusterSQL.take(conn, partition: 0, instance: "a", address: "a:1", ttlMilliseconds: 60_000, expectedEpoch: 0)
        _ = try ClusterSQL.take(conn, partition: 1, instance: "gone", address: "g:1", ttlMilliseconds: 1, expectedEpoch: 0)
        Thread.sleep(forTimeInterval: 0.02)

        let view = try ClusterSQL.view(conn)
        #expect(view.liveInstances == ["a", "b"])
        #expect(view.partitions == [
            ClusterView.Partition(partition: 0, epoch: 1, owner: "a", address: "a:1", leaseLive: true),
            ClusterView.Partition(partition: 1, epoch: 1, owner: "gone", address: "g:1", leaseLive: false),
            ClusterView.Partition(partition: 2, epoch: 0, owner: nil, address: nil, leaseLive: false),
            ClusterView.Partition(partition: 3, epoch: 0, owner: nil, address: nil, leaseLive: false),
        ])
        #expect(PartitionBalancer.plan(view: view, me: "b", serving: []) == [.take(partition: 1, expectedEpoch: 1),
                                                                            .take(partition: 3, expectedEpoch: 0)])

        let operators = try conn.execute("SELECT name, live, partitions, heartbeat_age < interval '1 minute' FROM herald_instances ORDER BY name")
        #expect((0..<operators.rowCount).map { "\(operators.string($0, 0)!) \(operators.string($0, 1)!) \(operators.string($0, 2)!) \(operators.string($0, 3)!)" }
                == ["a t 1 t", "b t 0 t", "gone f 0 t"])

        try ClusterSQL.leave(conn, instance: "a")
        #expect(try ClusterSQL.view(conn).liveInstances == ["b"])
    }

    /// A heartbeat keeps its instance's start while it is live; one back after its heartbeat
    /// expired starts anew.
    @Test func aHeartbeatAfterExpiryStartsTheInstanceAnew() throws {
        let url = try Self.database()
        let conn = try PGConnection.connect(url)
        defer { conn.close() }
        let started = "SELECT started_at::text FROM instances WHERE name = 'a'"
        try ClusterSQL.heartbeat(conn, instance: "a", address: "a:1", ttlMilliseconds: 60_000)
        let first = try conn.execute(started).string(0, 0)
        Thread.sleep(forTimeInterval: 0.01)
        try ClusterSQL.heartbeat(conn, instance: "a", address: "a:2", ttlMilliseconds: 1)
        #expect(try conn.execute(started).string(0, 0) == first)
        #expect(try conn.execute("SELECT address FROM instances WHERE name = 'a'").string(0, 0) == "a:2")
        Thread.sleep(forTimeInterval: 0.01)
        try ClusterSQL.heartbeat(conn, instance: "a", address: "a:2", ttlMilliseconds: 60_000)
        #expect(try conn.execute(started).string(0, 0) != first)
    }
}
