// SPEC §9 on a database of one partition: P fixed by migrate, the partition in acks, delivery
// lines and hello, and the lease's epoch fencing every append.
import Foundation
import HeraldCore
@testable import HeraldRuntime
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct PartitionLeaseTests {
    @Test func acksDeliveryLinesAndHelloNameThePartition() throws {
        let server = try TestServer()
        defer { server.stop() }
        let hello = try server.client(hello: false).call(["op": "hello", "token": "dev-token"])
        #expect(hello["partitions"] == 1 && hello["hash"] == "fnv1a64", "\(hello.canonicalString)")
        let route = hello["routes"]?.arrayValue?.first
        #expect(route?["partition"] == 0 && route?["address"]?.stringValue == "127.0.0.1:\(server.port)"
                && (route?["epoch"]?.intValue ?? 0) >= 1, "\(hello.canonicalString)")
        let c = try server.client()
        _ = try c.call(["op": "authorization", "user": "alice", "app": "com.example.mail", "status": "authorized",
                        "options": ["alert", "sound", "badge"]])
        let ack = try c.call(["op": "submit", "id": "n1", "app": "com.example.mail", "user": "alice", "title": "Hi"])
        #expect(ack["ok"] == true && ack["partition"] == 0 && ack["seq"] == 2, "\(ack.canonicalString)")
        let again = try c.call(["op": "submit", "id": "n1", "app": "com.example.mail", "user": "alice", "title": "Hi"])
        #expect(again["duplicate"] == true && again["partition"] == 0 && again["seq"] == 2, "\(again.canonicalString)")
        let consumer = try server.client()
        _ = try consumer.call(["op": "subscribe", "consumer": "push", "from": "earliest"])
        let line = try consumer.deliveries(1)[0]
        #expect(line["partition"] == 0 && line["cursor"] == 1, "\(line.canonicalString)")
        #expect(try consumer.call(["op": "ack", "consumer": "push", "partition": 0, "cursor": 1])["ok"] == true)
        let wrong = try consumer.call(["op": "ack", "consumer": "push", "partition": 3, "cursor": 1])
        #expect(wrong["error"]?["code"] == "invalid_field", "\(wrong.canonicalString)")
    }

    /// Another instance takes the partition (its epoch bumped in the database): the next append
    /// is refused inside its own transaction, nothing of it is stored, the producer hears
    /// `not_owner`, and the fenced instance stops.
    @Test func anAppendAfterTheLeaseWasTakenIsRefusedAndStoresNothing() throws {
        let server = try TestServer()
        defer { server.stop() }
        let c = try server.client()
        #expect(try c.call(["op": "registerApp", "app": "com.example.mail", "entitlements": []])["ok"] == true)
        let admin = try PGConnection.connect(server.url)
        defer { admin.close() }
        let taken = try admin.execute(LeaseSQL.takeOver, ["0", "other", "127.0.0.1:1", "5000"]).int64(0, 0)
        #expect(taken != nil)
        let refused = try c.call(["op": "submit", "id": "late", "app": "com.example.mail", "user": "alice", "title": "Hi"])
        #expect(refused["error"]?["code"] == "not_owner", "\(refused.canonicalString)")
        #expect(try admin.execute("SELECT count(*) FROM events WHERE notification_id = 'late'").int64(0, 0) == 0)
        #expect(try admin.execute("SELECT seq FROM partitions WHERE partition = 0").int64(0, 0) == 1, "no position used")
    }

    /// A graceful stop gives the lease up at once: it has expired when the process is gone.
    @Test func aGracefulStopReleasesTheLease() throws {
        let server = try TestServer()
        let url = server.url
        server.stop()
        let conn = try PGConnection.connect(url)
        defer { conn.close() }
        #expect(try conn.execute("SELECT lease_expires <= now() FROM partitions WHERE partition = 0").string(0, 0) == "t")
    }

    /// A renewal that reaches the database after its owner released the partition (it was in
    /// flight on another connection at the stop) extends nothing: the partition stays free.
    @Test func aRenewalAfterTheReleaseDoesNotExtendTheLease() throws {
        let url = try TestPostgres.freshDatabase()
        _ = try HeraldCommandTests.herald(["migrate", "--database-url", url])
        let conn = try PGConnection.connect(url)
        defer { conn.close() }
        let epoch = try #require(try LeaseSQL.takeOver(conn, partition: 0, instance: "a", address: "127.0.0.1:1",
                                                       ttlMilliseconds: 5000) as Int64?)
        try conn.execute(LeaseSQL.release, ["0", String(epoch)])
        let late = try conn.execute(LeaseSQL.renew, ["0", String(epoch), "5000", "127.0.0.1:1"])
        #expect(late.rowCount == 0)
        #expect(try conn.execute("SELECT lease_expires <= now() AND owner IS NULL FROM partitions WHERE partition = 0").string(0, 0) == "t")
    }

    @Test func migrateFixesPartitionsOnAnEmptyLogOnlyAndServeRefusesMoreThanOne() throws {
        let url = try TestPostgres.freshDatabase()
        let migrated = try HeraldCommandTests.herald(["migrate", "--database-url", url, "--partitions", "4"])
        #expect(migrated.status == 0 && migrated.stderr.contains("partitions: 4"), "\(migrated)")
        let conn = try PGConnection.connect(url)
        defer { conn.close() }
        #expect(try conn.execute("SELECT count(*) FROM partitions").int64(0, 0) == 4)
        #expect(try EventReader.partitioning(conn).count == 4)
        var config = ServiceConfiguration(databaseURL: url)
        config.port = 0
        config.handleSignals = false
        #expect(throws: ServiceError.self) { try HeraldService(configuration: config, log: { _ in }).start() }
        let outOfRange = try HeraldCommandTests.herald(["migrate", "--database-url", url, "--partitions", "0"])
        #expect(outOfRange.status != 0 && outOfRange.stderr.contains("out of range"), "\(outOfRange)")

        let served = try TestServer()
        _ = try served.client().call(["op": "registerApp", "app": "com.example.mail", "entitlements": []])
        served.stop()
        let fixed = try HeraldCommandTests.herald(["migrate", "--database-url", served.url, "--partitions", "8"])
        #expect(fixed.status != 0 && fixed.stderr.contains("P is fixed once anything is stored"), "\(fixed)")
    }
}

extension PartitionLeaseTests {
    /// `herald status` reads the deployment from the database: P, partition 0's owner and its
    /// lease while a serve runs, the consumers' lag.
    @Test func statusShowsThePartitionsOwnerLeaseAndConsumerLag() throws {
        let server = try TestServer()
        defer { server.stop() }
        let c = try server.client()
        _ = try c.call(["op": "authorization", "user": "alice", "app": "com.example.mail", "status": "authorized", "options": ["alert"]])
        _ = try c.call(["op": "submit", "id": "n1", "app": "com.example.mail", "user": "alice", "title": "Hi"])
        let consumer = try server.client()
        _ = try consumer.call(["op": "subscribe", "consumer": "push", "from": "earliest"])
        _ = try consumer.deliveries(1)
        let out = try HeraldCommandTests.herald(["status", "--database-url", server.url, "--json"])
        #expect(out.status == 0, "\(out)")
        let status = try JSONValue.parse(out.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(status["partitions"] == 1 && status["hash"] == "fnv1a64")
        let owner = status["owners"]?.arrayValue?.first
        #expect(owner?["partition"] == 0 && owner?["leaseValid"] == true && owner?["events"] == 2 && owner?["deliveries"] == 1,
                "\(out.stdout)")
        #expect(owner?["address"]?.stringValue == "127.0.0.1:\(server.port)")
        #expect(status["instances"]?.arrayValue?.count == 1)
        #expect(status["consumers"]?.arrayValue?.first?["consumer"] == "push", "\(out.stdout)")
        let text = try HeraldCommandTests.herald(["status", "--database-url", server.url])
        #expect(text.status == 0 && text.stdout.contains("partitions: 1 (fnv1a64)") && text.stdout.contains("lease valid"), "\(text)")
    }
}
