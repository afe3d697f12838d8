// The Swift consumer against a real `herald serve`: typed deliveries, batched acks, resuming after close and after a crash.
import Foundation
import HeraldClient
import HeraldTestSupport
import Testing

@Suite struct ConsumerTests {
    static let mail = ClientTestServer.mail

    static func submit(_ herald: HeraldProducer, _ ids: Range<Int>, user: String = "alice") async throws {
        var pending: [PendingAck] = []
        for i in ids {
            pending.append(await herald.send(Submit(id: "c\(i)", app: mail, user: user, title: "Order \(i)", body: "Shipped",
                                                    hiddenPreviewsBodyPlaceholder: "Order")))
        }
        for p in pending { _ = try await p.value }
    }

    static func producer(_ server: ClientTestServer) async throws -> HeraldProducer {
        let herald = try await HeraldProducer.connect(port: server.port, token: ClientTestServer.adminToken,
                                                      backoff: Backoff(initialMilliseconds: 20, maximumMilliseconds: 200))
        _ = try await herald.registerApp(mail)
        _ = try await herald.authorization(Authorization(user: "alice", app: mail, status: .authorized, options: [.alert, .sound, .badge]))
        return herald
    }

    /// How many live members `consumers` lists for `name` (nil: not listed), read until it is
    /// `count` or `seconds` have passed: the server sees a connection close a moment after it.
    static func members(of name: String, in herald: HeraldProducer, becoming count: Int, withinSeconds seconds: Double) async throws -> Int? {
        func read() async throws -> Int? {
            try await herald.consumers().raw["consumers"]?.arrayValue?
                .first(where: { $0["consumer"]?.stringValue == name })?["members"]?.arrayValue?.count
        }
        let deadline = Date().addingTimeInterval(seconds)
        var members = try await read()
        while members != count, Date() < deadline {
            try await Task.sleep(for: .milliseconds(20))
            members = try await read()
        }
        return members
    }

    /// Deliveries come as typed values in cursor order; acks are batched and the last one goes
    /// out on close, so a consumer subscribing again under the name starts after it.
    @Test func deliveriesAreTypedAndACloseAcksSoTheNextSubscribeGoesOn() async throws {
        let server = try ClientTestServer()
        let herald = try await Self.producer(server)
        try await Self.submit(herald, 0..<10)
        let consumer = try await herald.subscribe(consumer: "push", from: .earliest, ackEvery: 3, ackIntervalMilliseconds: 10_000)
        var seen: [Delivery] = []
        for try await d in consumer {
            seen.append(d)
            if seen.count == 10 { break }
        }
        #expect(seen.map(\.cursor) == Array(1...10))
        let first = try #require(seen.first)
        #expect(first.kind == .alert && first.user == "alice" && first.app == Self.mail && first.notification == "c0" && first.partition == 0)
        #expect(first.content?.title == "Order 0" && first.presentation?.banner == true && first.reason == "delivered")
        #expect(first.line.hasPrefix(#"{"#) && first.line.contains(#""op":"delivery""#))
        await consumer.close()
        #expect(consumer.acknowledged[0] == 10, "the close acks the last delivery handed out")

        let again = try await herald.subscribe(consumer: "push")
        await #expect(throws: HeraldError.self, "nothing new after the acked cursor") { _ = try await again.next(timeoutMilliseconds: 300) }
        try await Self.submit(herald, 10..<11)
        let next = try await again.next(timeoutMilliseconds: 10_000)
        #expect(next?.cursor == 11 && next?.notification == "c10")
        await again.close()
        #expect(try await again.next() == nil, "a closed consumer's sequence ends")
        await herald.close()
    }

    /// A consumer reading while the server is killed (SIGKILL) or stopped (SIGTERM: goodbye) and
    /// started again resumes after the last line it received: every cursor once, in order, nothing skipped.
    @Test(arguments: [SIGKILL, SIGTERM])
    func aConsumerResumesAfterTheServerStopsWithNothingSkippedOrRepeated(signal: Int32) async throws {
        let server = try ClientTestServer()
        let herald = try await Self.producer(server)
        try await Self.submit(herald, 0..<200)
        let consumer = try await HeraldConsumer.subscribe(port: server.port, token: ClientTestServer.adminToken, consumer: "audit",
                                                          from: .earliest, ackEvery: 50,
                                                          backoff: Backoff(initialMilliseconds: 20, maximumMilliseconds: 200))
        var cursors: [Int64] = []
        while cursors.count < 100, let d = try await consumer.next(timeoutMilliseconds: 10_000) { cursors.append(d.cursor) }
        if signal == SIGKILL { server.serve.kill9() } else { #expect(server.serve.terminate()) }
        try server.serve.start()
        try await Self.submit(herald, 200..<300)
        while cursors.count < 300, let d = try await consumer.next(timeoutMilliseconds: 20_000) { cursors.append(d.cursor) }
        #expect(cursors == Array(1...300))
        await consumer.close()
        #expect(consumer.acknowledged[0] == 300)
        await herald.close()
    }

    /// With manual acks, reading five lines and closing acks only the two the reader acked: the
    /// next subscribe under the name starts at the third.
    @Test func aConsumerWithManualAcksAcknowledgesOnlyWhatItIsTold() async throws {
        let server = try ClientTestServer()
        let herald = try await Self.producer(server)
        try await Self.submit(herald, 0..<5)
        let consumer = try await HeraldConsumer.subscribe(port: server.port, token: ClientTestServer.adminToken, consumer: "broker",
                                                          from: .earliest, ackEvery: 1, manualAcks: true)
        var read: [Delivery] = []
        for _ in 0..<5 { if let d = try await consumer.next(timeoutMilliseconds: 10_000) { read.append(d) } }
        #expect(read.map(\.cursor) == [1, 2, 3, 4, 5])
        consumer.ack(read[1])
        await consumer.close()
        #expect(consumer.acknowledged[0] == 2, "\(consumer.acknowledged)")

        let again = try await herald.subscribe(consumer: "broker")
        let next = try await again.next(timeoutMilliseconds: 10_000)
        #expect(next?.cursor == 3 && next?.notification == "c2", "\(String(describing: next))")
        await again.close()
        await herald.close()
    }

    /// A filter leaves deliveries out of the loop; they still advance the cursor that is acked.
    @Test func aFilterLeavesDeliveriesOutButTheirCursorsAreAcked() async throws {
        let server = try ClientTestServer()
        let herald = try await Self.producer(server)
        try await Self.submit(herald, 0..<5)
        _ = try await herald.withdraw(Withdraw(app: Self.mail, id: "c4", user: "alice"))
        let consumer = try await herald.subscribe(consumer: "withdrawals", from: .earliest,
                                                  filter: DeliveryFilter(apps: [Self.mail], kinds: [.withdrawn]))
        let d = try await consumer.next(timeoutMilliseconds: 10_000)
        #expect(d?.kind == .withdrawn && d?.notification == "c4" && d?.cursor == 6, "\(String(describing: d))")
        await consumer.close()
        #expect(consumer.acknowledged[0] == 6)
        await herald.close()
    }

    /// An ephemeral stream reads without acking: under a consumer's name it starts at that
    /// consumer's cursor, moves it not and does not take the consumer's place; without a name it
    /// reads from where `from` says.
    @Test func anEphemeralStreamReadsWithoutMovingTheCursorNorDisplacingTheConsumer() async throws {
        let server = try ClientTestServer()
        let herald = try await Self.producer(server)
        try await Self.submit(herald, 0..<5)
        let durable = try await herald.subscribe(consumer: "gateway", from: .earliest, ackEvery: 1)
        for _ in 0..<3 { _ = try await durable.next(timeoutMilliseconds: 10_000) }
        _ = try await durable.next(timeoutMilliseconds: 10_000)  // the third is processed and acked
        durable.flushAcks()
        try await Task.sleep(for: .milliseconds(200))
        let peek = try await HeraldConsumer.stream(port: server.port, token: ClientTestServer.adminToken, consumer: "gateway")
        #expect(try await peek.next(timeoutMilliseconds: 10_000)?.cursor == 4)
        #expect(try await peek.next(timeoutMilliseconds: 10_000)?.cursor == 5)
        await peek.close()
        let all = try await HeraldConsumer.stream(port: server.port, token: ClientTestServer.adminToken, from: .earliest,
                                                  filter: DeliveryFilter(kinds: [.alert]))
        #expect(try await all.next(timeoutMilliseconds: 10_000)?.cursor == 1)
        await all.close()
        try await Self.submit(herald, 5..<6)
        #expect(try await durable.next(timeoutMilliseconds: 10_000)?.cursor == 5, "the gateway still streams")
        #expect(try await durable.next(timeoutMilliseconds: 10_000)?.cursor == 6)
        await durable.close()
        #expect(durable.acknowledged[0] == 6)
        await herald.close()
    }

    /// A closed consumer's connection ends at the server even while a child process the application
    /// started after connecting still runs: the client's descriptors are not inherited (close-on-exec)
    /// and its close shuts the connection down; without both, the child held the socket open and the
    /// group never handed the partition over.
    @Test func aClosedConsumerLeavesItsGroupWhileAChildProcessStartedAfterItRuns() async throws {
        let server = try ClientTestServer()
        let herald = try await Self.producer(server)
        let consumer = try await herald.subscribe(consumer: "forked", from: .earliest)
        var child: pid_t = 0
        var argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/sleep"), strdup("30"), nil]
        defer { for p in argv { free(p) } }
        #expect(posix_spawn(&child, "/bin/sleep", nil, nil, &argv, environ) == 0)
        defer { kill(child, SIGKILL); var status: Int32 = 0; waitpid(child, &status, 0) }
        await consumer.close()
        // Seconds at most on a loaded host; with the socket inherited it never ends.
        #expect(try await Self.members(of: "forked", in: herald, becoming: 0, withinSeconds: 15) == 0,
                "the server still counts the closed consumer's connection")
        await herald.close()
    }

    /// Two consumers under one name form a group: on one partition the newer one streams and the
    /// older waits, without an error; when the newer closes, the older goes on after the last ack.
    @Test func twoConsumersOfOneNameShareItAndTheOlderGoesOnWhenTheNewerCloses() async throws {
        let server = try ClientTestServer()
        // A step that fails says which, with the server's log (its consumer lines at debug).
        func step<T>(_ name: String, _ body: () async throws -> T) async throws -> T {
            do { return try await body() } catch {
                Issue.record("\(name): \(error)\nserver log:\n\(server.serve.tail(40))")
                throw error
            }
        }
        let herald = try await Self.producer(server)
        let first = try await herald.subscribe(consumer: "shared", from: .earliest, ackEvery: 1)
        try await Self.submit(herald, 0..<2)
        #expect(try await step("first reads 1") { try await first.next(timeoutMilliseconds: 30_000)?.cursor } == 1)
        let second = try await herald.subscribe(consumer: "shared", ackEvery: 1)
        // Nothing was acknowledged yet (a delivery is processed once the next is asked for).
        #expect(try await step("second reads 1") { try await second.next(timeoutMilliseconds: 30_000)?.cursor } == 1)
        #expect(try await step("second reads 2") { try await second.next(timeoutMilliseconds: 30_000)?.cursor } == 2)
        try await Self.submit(herald, 2..<3)
        #expect(try await step("second reads 3") { try await second.next(timeoutMilliseconds: 30_000)?.cursor } == 3)
        await second.close()
        #expect(second.acknowledged[0] == 3)
        try await Self.submit(herald, 3..<4)
        // Cursor 2 may have reached the older member before the newer joined: it is handed out
        // (delivered once more, at least once); 3 never is, as it was sent after the handover.
        var resumed: [Int64] = []
        while resumed.last != 4, resumed.count < 3,
              let d = try await step("first resumes after \(resumed)", { try await first.next(timeoutMilliseconds: 30_000) }) {
            resumed.append(d.cursor)
        }
        #expect(resumed == [4] || resumed == [2, 4], "the older member streams again, after the last ack: \(resumed)")
        await first.close()
        await herald.close()
    }
}
