// The Swift producer against a real `herald serve`: every op's ack, typed errors, pipelining, kill -9 and goodbye mid-stream.
import Foundation
import HeraldClient
import HeraldTestSupport
import Testing

@Suite struct ProducerTests {
    static let mail = ClientTestServer.mail

    /// Every op of the protocol has a method, each returning its ack: `seq` in order, `partition`
    /// 0 on a one-partition server, `warnings` typed, and a resent submit is `duplicate` with its first seq.
    @Test func everyOpIsAcknowledgedWithPartitionSeqDuplicateAndWarnings() async throws {
        let server = try ClientTestServer()
        let herald = try await HeraldProducer.connect(port: server.port, token: ClientTestServer.adminToken)
        #expect(herald.hello.roles.contains("admin") && herald.hello.partitions == 1)
        let registered = try await herald.registerApp(Self.mail, entitlements: [.communication])
        #expect(registered.seq > 0 && registered.partition == 0 && !registered.duplicate)
        let authorized = try await herald.authorization(Authorization(user: "alice", app: Self.mail, status: .authorized, options: [.alert, .sound, .badge]))
        #expect(authorized.seq == registered.seq + 1)
        let submit = Submit(id: "n1", app: Self.mail, user: "alice", interruptionLevel: .active, title: "Your order shipped.",
                            body: "Arrives Tuesday.", actions: [Action(id: "track", title: "Track")], data: ["order": 1042])
        let first = try await herald.submit(submit)
        #expect(first.seq == authorized.seq + 1 && !first.duplicate && first.partition == 0)
        #expect(Set(first.warnings.map(\.code)) == ["title_ends_with_punctuation", "missing_hidden_previews_placeholder"], "\(first.warnings)")
        #expect(first.warnings.allSatisfy { !$0.title.isEmpty && !$0.detail.isEmpty })
        let again = try await herald.submit(submit)
        #expect(again.duplicate && again.seq == first.seq)

        var seqs: [Int64] = [first.seq]
        seqs.append(try await herald.settings(Settings(user: "alice", app: Self.mail, sound: false, delivery: .immediate)).seq)
        seqs.append(try await herald.settings(Settings(user: "alice", showPreviews: .whenUnlocked, attentionBudget: .perDay(50))).seq)
        seqs.append(try await herald.settings(Settings(user: "alice", attentionBudget: .unlimited)).seq)
        seqs.append(try await herald.summarySchedule(SummarySchedule(user: "alice", times: ["08:00", "18:00"], timeZone: "Europe/Paris")).seq)
        seqs.append(try await herald.focusDefine(FocusDefine(user: "alice", focus: "Sleep", allowedPeople: ["bob"], allowTimeSensitive: true,
                                                             schedule: [FocusWindow(days: [1, 2, 3, 4, 5], start: "22:00", end: "07:00")],
                                                             timeZone: "Europe/Paris")).seq)
        seqs.append(try await herald.focusOn(FocusOn(user: "alice", focus: "Sleep", until: "2026-03-27T09:00:00Z")).seq)
        seqs.append(try await herald.focusOff(FocusOff(user: "alice", focus: "Sleep")).seq)
        seqs.append(try await herald.mute(Mute(user: "alice", app: Self.mail, until: "2026-03-27T08:00:00Z")).seq)
        seqs.append(try await herald.snooze(Snooze(user: "alice", app: Self.mail, id: "n1", until: "2026-03-27T08:00:00Z")).seq)
        seqs.append(try await herald.opened(Opened(user: "alice", app: Self.mail, id: "n1")).seq)
        seqs.append(try await herald.badgeClear(BadgeClear(user: "alice", app: Self.mail)).seq)
        seqs.append(try await herald.authorization(Authorization(user: "carol", app: Self.mail, status: .provisional)).seq)
        seqs.append(try await herald.provisionalKeep(ProvisionalKeep(user: "carol", app: Self.mail, delivery: .summary)).seq)
        seqs.append(try await herald.provisionalTurnOff(ProvisionalTurnOff(user: "carol", app: Self.mail)).seq)
        seqs.append(try await herald.withdraw(Withdraw(app: Self.mail, id: "n1")).seq)
        seqs.append(try await herald.clock(advanceTo: "2026-03-27T07:00:05Z").seq)
        #expect(seqs == Array(first.seq...(first.seq + Int64(seqs.count) - 1)), "one event each, in order: \(seqs)")
        #expect(try await herald.ping()["op"] == "pong")
        #expect(try await herald.stats()["ok"] == true)
        let fanOut = try await herald.submit(Submit(id: "n2", app: Self.mail, users: ["alice", "bob"], title: "Hello",
                                                    hiddenPreviewsBodyPlaceholder: "Hi"))
        #expect(fanOut.seq > seqs.last! && fanOut.warnings.isEmpty)
        await herald.close()
    }

    /// Refusals are `HeraldError`s with the server's code, title and detail and a kind to act on;
    /// the connection goes on after one. A wrong token fails `connect` itself.
    @Test func refusalsAreTypedErrorsAndTheConnectionGoesOn() async throws {
        let server = try ClientTestServer()
        let admin = try await HeraldProducer.connect(port: server.port, token: ClientTestServer.adminToken)
        do {
            _ = try await admin.withdraw(Withdraw(app: Self.mail, id: "never-sent"))
            Issue.record("a withdraw of an unknown id was acknowledged")
        } catch {
            #expect(error.code == "unknown_notification" && error.kind == .notFound && !error.title.isEmpty && !error.detail.isEmpty, "\(error)")
        }
        do {
            _ = try await admin.submit(Submit(id: "x", app: Self.mail, user: "alice", title: "Hi", relevanceScore: 2))
            Issue.record("a relevance score of 2 was acknowledged")
        } catch {
            #expect(error.code == "relevance_score_out_of_range" && error.kind == .validation, "\(error)")
        }
        #expect(try await admin.ping()["op"] == "pong", "the connection goes on after refusals")

        let producer = try await HeraldProducer.connect(port: server.port, token: ClientTestServer.producerToken)
        await #expect(throws: HeraldError.self) { _ = try await producer.registerApp("com.example.other") }
        do {
            _ = try await producer.submit(Submit(id: "y", app: "com.example.other", user: "alice", title: "Hi"))
            Issue.record("a submit for an app the token does not list was acknowledged")
        } catch {
            #expect(error.code == "forbidden_app" && error.kind == .forbidden, "\(error)")
        }
        #expect(try await producer.submit(Submit(id: "z", app: Self.mail, user: "alice", title: "Hi", hiddenPreviewsBodyPlaceholder: "x")).seq > 0)

        do {
            _ = try await HeraldProducer.connect(port: server.port, token: "not-a-token")
            Issue.record("a wrong token connected")
        } catch {
            #expect(error.code == "invalid_token" && error.kind == .authentication, "\(error)")
        }
        do {
            _ = try await HeraldProducer.connect(port: LocalClusterPort.free())
            Issue.record("connected to a closed port")
        } catch {
            #expect(error.code == "connect_failed" && error.title.contains("Connection refused"), "\(error)")
        }
        await admin.close()
        await producer.close()
    }

    /// 10,000 submits pipelined from one task through a window of 512: acked in order, each stored once.
    @Test func tenThousandPipelinedSubmitsAreAckedInOrder() async throws {
        let server = try ClientTestServer()
        let herald = try await HeraldProducer.connect(port: server.port, token: ClientTestServer.adminToken, window: 512)
        var pending: [PendingAck] = []
        for i in 0..<10_000 {
            pending.append(await herald.send(Submit(id: "p\(i)", app: Self.mail, user: "user-\(i % 100)", title: "Order \(i)",
                                                    hiddenPreviewsBodyPlaceholder: "Order")))
            #expect(herald.inFlight <= 512)
        }
        var seqs: [Int64] = []
        for p in pending { seqs.append(try await p.value.seq) }
        #expect(seqs == seqs.sorted() && Set(seqs).count == 10_000)
        #expect(try server.storedSubmits() == 10_000)
        await herald.close()
    }

    /// Submits pipelined while the server is killed (SIGKILL) or stopped (SIGTERM: goodbye) and
    /// started again: the client reconnects and sends again what was not answered; every submit
    /// ends acknowledged, each (app, id) stored once, resends of committed ones `duplicate`.
    @Test(arguments: [SIGKILL, SIGTERM])
    func submitsInFlightWhenTheServerStopsAreResentAndStoredOnce(signal: Int32) async throws {
        let server = try ClientTestServer()
        let herald = try await HeraldProducer.connect(port: server.port, token: ClientTestServer.adminToken, window: 1024,
                                                      backoff: Backoff(initialMilliseconds: 20, maximumMilliseconds: 200))
        let n = 10_000
        let sender = Task {
            var pending: [PendingAck] = []
            for i in 0..<n {
                pending.append(await herald.send(Submit(id: "k\(i)", app: Self.mail, user: "user-\(i % 100)", title: "Order \(i)",
                                                        hiddenPreviewsBodyPlaceholder: "Order")))
            }
            return pending
        }
        // Stop the server once the load is under way.
        while try server.storedSubmits() < 1_500 { try await Task.sleep(for: .milliseconds(5)) }
        if signal == SIGKILL { server.serve.kill9() } else { #expect(server.serve.terminate()) }
        try await Task.sleep(for: .milliseconds(300))
        try server.serve.start()
        var seqs = Set<Int64>(), duplicates = 0
        for p in await sender.value {
            let ack = try await p.value
            seqs.insert(ack.seq)
            if ack.duplicate { duplicates += 1 }
        }
        #expect(seqs.count == n, "one seq per submit")
        #expect(try server.storedSubmits() == n)
        #expect(herald.reconnects >= 1)
        print("stop by signal \(signal): \(herald.reconnects) reconnects, \(duplicates) resends answered as duplicates")
        await herald.close()
    }
}
