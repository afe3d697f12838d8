// Limits and failures: hello and idle deadlines, the connection cap, and PostgreSQL going away and coming back.
import Foundation
import HeraldCore
import HeraldRuntime
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct ServiceHygieneTests {
    @Test func connectionWithoutHelloIsClosedAtTheHelloDeadline() throws {
        let server = try TestServer(tokens: TokenTable(["secret-token": Grant(name: "x", roles: [.admin], apps: nil)])) {
            $0.helloTimeoutMilliseconds = 300
        }
        defer { server.stop() }
        let c = try server.client(hello: false)
        let reply = try c.readJSON(timeoutMilliseconds: 5_000)
        #expect(reply["error"]?["code"] == "hello_timeout")
        #expect(throws: WireClient.Failure.self) { _ = try c.readLine(timeoutMilliseconds: 5_000) }
    }

    @Test func idleConnectionIsClosedAtTheIdleDeadline() throws {
        let server = try TestServer { $0.idleTimeoutMilliseconds = 300; $0.helloTimeoutMilliseconds = 300 }
        defer { server.stop() }
        let c = try server.client()
        #expect(try c.call(["op": "stats"])["ok"] == true)
        #expect(throws: WireClient.Failure.self) { _ = try c.readLine(timeoutMilliseconds: 5_000) }
    }

    /// A submit's completion holds the service strongly until the writer completes the append;
    /// a service stopped after its submits were acknowledged is freed, so that reference is gone
    /// by then.
    @Test func aStoppedServiceIsFreedOnceItsSubmitsAreAcknowledged() throws {
        weak var freed: HeraldService?
        do {
            let server = try TestServer()
            freed = server.service
            let c = try server.client()
            #expect(try c.call(["op": "registerApp", "app": "com.example.mail", "entitlements": []])["ok"] == true)
            for i in 0..<50 {
                let r = try c.call(["op": "submit", "app": "com.example.mail", "id": .string("n-\(i)"), "user": "u1",
                                    "title": "Hello", "hiddenPreviewsBodyPlaceholder": "Message"])
                #expect(r["ok"] == true)
            }
            c.close()
            server.stop()
        }
        // The loop thread lets go of the service as it ends.
        for _ in 0..<200 where freed != nil { usleep(10_000) }
        #expect(freed == nil)
    }

    @Test func connectionsPastTheMaximumAreRefusedWithBusy() throws {
        let server = try TestServer { $0.maxConnections = 2 }
        defer { server.stop() }
        let a = try server.client(), b = try server.client()
        let c = try WireClient(port: server.port)
        #expect(try c.readJSON()["error"]?["code"] == "busy")
        #expect(try a.call(["op": "ping"])["op"] == "pong" && b.call(["op": "ping"])["op"] == "pong")
    }

    @Test func postgresOutageGivesStoreUnavailableAndAcksResumeAfterIt() throws {
        // A cluster of its own: this test crashes it.
        let folder = FileManager.default.temporaryDirectory.path + "/herald-outage-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let cluster = try LocalCluster(dataDirectory: folder + "/pgdata")
        try cluster.start()
        defer { cluster.kill(); try? FileManager.default.removeItem(atPath: folder) }
        let url = cluster.connectionString()
        let server = try TestServer(url: url)
        defer { server.stop() }
        let c = try server.client()
        #expect(try c.call(["op": "registerApp", "app": "a", "entitlements": []])["ok"] == true)

        cluster.kill()
        var sawUnavailable = false
        for i in 0..<20 {
            let r = try c.call(["op": "registerApp", "app": .string("down-\(i)"), "entitlements": []])
            if r["error"]?["code"] == "store_unavailable" { sawUnavailable = true; break }
            #expect(r["ok"] != true, "no acknowledgement while PostgreSQL is down")
            usleep(100_000)
        }
        #expect(sawUnavailable)

        try cluster.start()
        var resumed = false
        for i in 0..<100 {
            if try c.call(["op": "registerApp", "app": .string("up-\(i)"), "entitlements": []])["ok"] == true { resumed = true; break }
            usleep(200_000)
        }
        #expect(resumed, "acks resume once PostgreSQL is back")
        let conn = try PGConnection.connect(url)
        let types = try EventReader.events(conn, after: 0).map(\.row.body)
        #expect(types.count == 2 && !types.contains { $0.contains("down-") }, "nothing refused was stored")
    }
}

@Suite struct DurabilityTests {
    @Test func startUpRefusesADatabaseWithSynchronousCommitOffUnlessTold() throws {
        let url = try TestPostgres.freshDatabase()
        let admin = try PGConnection.connect(url)
        let db = try #require(try admin.execute("SELECT current_database()").string(0, 0))
        try admin.execute("ALTER DATABASE \(db) SET synchronous_commit = off")
        var config = ServiceConfiguration(databaseURL: url)
        config.port = 0
        config.handleSignals = false
        #expect {
            try HeraldService(configuration: config) { _ in }.start()
        } throws: { error in
            "\(error)".contains("synchronous_commit=off") && "\(error)".contains("--unsafe-durability")
        }
        config.allowUnsafeDurability = true
        var warned = false
        let service = HeraldService(configuration: config) { if $0.contains("WARNING") { warned = true } }
        #expect(throws: Never.self) { try service.start() }
        #expect(warned)
    }
}
