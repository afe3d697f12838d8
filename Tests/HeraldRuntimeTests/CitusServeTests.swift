// A real `herald serve` on a Citus coordinator (two workers): submit, ack, a consumer's delivery; status and the operator views.
import Foundation
import Glibc
import HeraldCore
import HeraldStore
import HeraldTestSupport
import HeraldWireTesting
import Testing

@Suite(.enabled(if: TestCitus.isInstalled, Comment(rawValue: TestCitus.missingReason ?? "")))
struct CitusServeTests {
    @Test func serveOnACitusCoordinatorAcksSubmitsDeliversToConsumersAndAnswersOperators() throws {
        let url = try TestCitus.freshDatabase(migrated: false)
        let migrated = try HeraldCommandTests.herald(["migrate", "--database-url", url, "--citus"])
        #expect(migrated.status == 0, "\(migrated)")
        #expect(migrated.stderr.contains("citus: distributed over 2 worker(s)"), "\(migrated)")
        let again = try HeraldCommandTests.herald(["migrate", "--database-url", url, "--citus"])
        #expect(again.status == 0 && again.stderr.contains("citus: already distributed over 2 worker(s)"), "\(again)")

        let log = FileManager.default.temporaryDirectory.path + "/herald-citus-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).log"
        defer { try? FileManager.default.removeItem(atPath: log) }
        let serve = try ServeProcess(databaseURL: url, logPath: log)
        try serve.start()
        defer { serve.terminate() }

        let consumer = try WireClient(port: serve.port)
        #expect(try consumer.request(#"{"op":"hello","token":"x"}"#)["ok"] == true)
        #expect(try consumer.request(#"{"op":"subscribe","consumer":"push","from":"earliest"}"#)["ok"] == true)
        let producer = try WireClient(port: serve.port)
        #expect(try producer.request(#"{"op":"hello","token":"x"}"#)["ok"] == true)
        #expect(try producer.request(#"{"op":"registerApp","app":"com.example.mail","entitlements":[]}"#)["ok"] == true)
        let submit = #"{"op":"submit","app":"com.example.mail","user":"alice","id":"n-1","title":"Hi"}"#
        let ack = try producer.request(submit)
        #expect(ack["ok"] == true && ack["partition"]?.intValue == 0 && ack["seq"]?.intValue != nil, "\(ack.canonicalString)")
        let duplicate = try producer.request(submit)
        #expect(duplicate["seq"] == ack["seq"], "a resubmit answers the stored seq: \(duplicate.canonicalString)")

        var delivery: JSONValue?
        for _ in 0..<20 where delivery == nil {
            let line = try consumer.readJSON(timeoutMilliseconds: 10_000)
            if line["op"] == "delivery", line["notification"] == "n-1" { delivery = line }
        }
        let cursor = try #require(delivery?["cursor"]?.intValue, "the consumer receives the submit's decision: \(serve.tail())")
        #expect(delivery?["partition"]?.intValue == 0)
        try consumer.send(#"{"op":"ack","consumer":"push","partition":0,"cursor":\#(cursor)}"#)

        let conn = try PGConnection.connect(url)
        defer { conn.close() }
        var acked: Int64 = 0
        for _ in 0..<200 where acked < cursor {
            acked = try conn.execute("SELECT acked FROM consumer_cursors WHERE name = 'push' AND partition = 0").int64(0, 0) ?? 0
            usleep(20_000)
        }
        #expect(acked == cursor, "the ack is stored on the partition's shard")
        #expect(try conn.execute("SELECT count(*) FROM events WHERE type = 'submit'").int64(0, 0) == 1)

        // The operators' command and views answer on the coordinator.
        let status = try HeraldCommandTests.herald(["status", "--database-url", url])
        #expect(status.status == 0 && status.stdout.contains("push"), "\(status)")
        let views = try conn.execute("SELECT viewname FROM pg_views WHERE schemaname = 'public' AND viewname LIKE 'herald\\_%' ORDER BY 1")
        #expect(views.rowCount >= 12)
        for i in 0..<views.rowCount {
            let view = views.string(i, 0) ?? ""
            #expect(throws: Never.self, "\(view) answers on the coordinator") { try conn.execute("SELECT * FROM \(view)") }
        }
        let owners = try conn.execute("SELECT owner, lease_valid FROM herald_partition_owners WHERE partition = 0")
        #expect(owners.string(0, 1) == "t")
        consumer.close()
        producer.close()
        #expect(serve.terminate(), "serve stops on SIGTERM: \(serve.tail())")
    }
}
