// The Swift producer's routing by partition: against a real one-partition server, a pure resend rule, and four partitions when serve takes them.
import Foundation
@testable import HeraldClient
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct RoutingTests {
    /// With one partition, hello's routes name the instance connected to: every user's request goes
    /// there and no other connection opens; a refresh (a second hello) gives the same routes.
    @Test func withOnePartitionTheRoutesNameTheConnectedInstance() async throws {
        let server = try ClientTestServer()
        let herald = try await HeraldProducer.connect(port: server.port, token: ClientTestServer.adminToken)
        #expect(herald.hello.partitions == 1 && herald.hello.hash == "fnv1a64")
        #expect(herald.hello.routes.map(\.address) == ["127.0.0.1:\(server.port)"])
        _ = try await herald.registerApp(ClientTestServer.mail)
        for user in ["alice", "Zoë", "日本語", "😀"] {
            let ack = try await herald.submit(Submit(id: "r-\(user)", app: ClientTestServer.mail, user: user, title: "Hi", hiddenPreviewsBodyPlaceholder: "Hi"))
            #expect(ack.partition == 0)
        }
        let again = try await herald.refreshRoutes()
        #expect(again.routes == herald.hello.routes && again.roles == herald.hello.roles)
        await herald.close()
    }

    static func routes(_ first: Int, _ other: String) throws -> HelloReply {
        let routes = (0..<4).map { p -> String in #"{"partition":\#(p),"address":"\#(p % 2 == 0 ? "127.0.0.1:\(first)" : other)","epoch":1}"# }
        return HelloReply(reply: try #require(HeraldJSON.parse(#"{"ok":true,"op":"hello","partitions":4,"hash":"fnv1a64","routes":[\#(routes.joined(separator: ","))]}"#).objectValue))
    }

    /// A user of each partition of four (the fixture's first).
    static func users() throws -> [String] {
        let cases = try PartitionFixtureTests.fixture()
        return try (0..<4).map { p in
            try #require(cases.first { $0["partitions"]?["4"]?.intValue == Int64(p) && $0["user"] != "" }?["user"]?.stringValue)
        }
    }

    static func submit(_ id: String, _ user: String) -> Submit {
        Submit(id: id, app: ClientTestServer.mail, user: user, title: "Hi", hiddenPreviewsBodyPlaceholder: "Hi")
    }

    /// Routes naming an owner where nothing listens: its partitions' requests go to the instance
    /// connected to (which forwards), and the owner is marked unreachable.
    @Test func anOwnerThatCannotBeReachedLeavesItsRequestsToTheConnectedInstance() async throws {
        let server = try ClientTestServer()
        let herald = try await HeraldProducer.connect(port: server.port, token: ClientTestServer.adminToken,
                                                      backoff: Backoff(initialMilliseconds: 10, maximumMilliseconds: 50))
        _ = try await herald.registerApp(ClientTestServer.mail)
        let dead = "127.0.0.1:\(LocalClusterPort.free())"
        herald.helloReplaced(try Self.routes(server.port, dead))
        let users = try Self.users()
        for (i, user) in users.enumerated() { #expect(try await herald.submit(Self.submit("dead-\(i)", user)).seq > 0) }
        #expect(herald.ownerAddresses == [dead: false])
        await herald.close()
    }

    /// Routes naming another server as the owner of partitions 1 and 3: their submits are stored
    /// there (sent there again, they are duplicates), the others on the server connected to.
    @Test func requestsForPartitionsOwnedElsewhereGoOnAConnectionToTheirOwner() async throws {
        let (server, owner) = (try ClientTestServer(), try ClientTestServer())
        let direct = try await HeraldProducer.connect(port: owner.port, token: ClientTestServer.adminToken, routing: false)
        _ = try await direct.registerApp(ClientTestServer.mail)
        let herald = try await HeraldProducer.connect(port: server.port, token: ClientTestServer.adminToken)
        _ = try await herald.registerApp(ClientTestServer.mail)
        herald.helloReplaced(try Self.routes(server.port, "127.0.0.1:\(owner.port)"))
        let users = try Self.users()
        for (i, user) in users.enumerated() { _ = try await herald.submit(Self.submit("owned-\(i)", user)) }
        #expect(herald.ownerAddresses == ["127.0.0.1:\(owner.port)": true])
        await herald.close()
        let first = try await HeraldProducer.connect(port: server.port, token: ClientTestServer.adminToken, routing: false)
        for (producer, stored) in [(first, [0, 2]), (direct, [1, 3])] {
            for (i, user) in users.enumerated() {
                #expect(try await producer.submit(Self.submit("owned-\(i)", user)).duplicate == stored.contains(i), "\(i)")
            }
            await producer.close()
        }
    }

    /// A routed request goes again after `not_owner` (a few times), and after its owner could not
    /// be reached (the owner is then marked); any other error, or the same on the connected
    /// instance, is its answer.
    @Test func aRoutedRequestIsSentAgainAfterNotOwnerOrAnUnreachableOwnerOnly() {
        let notOwner = HeraldError(code: "not_owner", title: "")
        let unreachable = HeraldError(code: "unreachable", title: "")
        let viaOwner = RoutedSend(owner: "b:1")
        #expect(viaOwner.resends(after: HeraldError(code: "forbidden_app", title: ""), limit: 3) == nil)
        #expect(viaOwner.resends(after: unreachable, limit: 3) == .some("b:1"))
        viaOwner.sentTo(nil)
        #expect(viaOwner.resends(after: unreachable, limit: 3) == nil, "the connected instance's own failure is the answer")
        #expect(viaOwner.resends(after: notOwner, limit: 3) == .some(nil))
        #expect(viaOwner.resends(after: notOwner, limit: 3) == .some(nil))
        #expect(viaOwner.resends(after: notOwner, limit: 3) == nil, "three resends at most")
    }

    /// Four partitions on two instances: each user's submit is acked in the fixture's partition.
    /// Cancelled (skipped) while `herald serve` refuses a database of more than one partition.
    @Test func withFourPartitionsOnTwoInstancesEachUserIsAckedInItsPartition() async throws {
        let url = try TestPostgres.freshDatabase()
        let c = try PGConnection.connect(url)
        _ = try c.execute("SELECT herald_set_partitions($1::integer)", ["4"])
        c.close()
        let tmp = FileManager.default.temporaryDirectory.path
        var servers: [ServeProcess] = []
        defer { for s in servers { s.terminate() } }
        for name in ["a", "b"] {
            let port = LocalClusterPort.free()
            let s = try ServeProcess(databaseURL: url, port: port, logPath: "\(tmp)/herald-routing-\(getpid())-\(name).log",
                                     extraArguments: ["--instance", name, "--advertise", "127.0.0.1:\(port)"])
            do {
                try s.start()
            } catch {
                if "\(error)".contains("partitions") {
                    try Test.cancel("herald serve does not serve a database of 4 partitions yet")
                }
                throw error
            }
            servers.append(s)
        }
        let herald = try await HeraldProducer.connect(port: servers[0].port)
        let addresses = Set(servers.map { "127.0.0.1:\($0.port)" })
        let deadline = Date().addingTimeInterval(30)
        while Set(herald.hello.routes.map(\.address)) != addresses && Date() < deadline {
            try await Task.sleep(for: .milliseconds(500))
            try await herald.refreshRoutes()
        }
        #expect(herald.hello.partitions == 4 && Set(herald.hello.routes.map(\.address)) == addresses)
        _ = try await herald.registerApp(ClientTestServer.mail)
        let cases = try PartitionFixtureTests.fixture().compactMap { c -> (String, Int)? in
            guard let user = c["user"]?.stringValue, !user.isEmpty, Array(user.precomposedStringWithCanonicalMapping.utf8) == Array(user.utf8),
                  let p = c["partitions"]?["4"]?.intValue else { return nil }
            return (user, Int(p))
        }
        var pending: [(Int, PendingAck)] = []
        for (i, (user, partition)) in cases.enumerated() {
            pending.append((partition, await herald.send(Submit(id: "p-\(i)", app: ClientTestServer.mail, user: user, title: "Hi",
                                                                hiddenPreviewsBodyPlaceholder: "Hi"))))
        }
        for (partition, ack) in pending { #expect(try await ack.value.partition == partition) }
        await herald.close()
    }
}
