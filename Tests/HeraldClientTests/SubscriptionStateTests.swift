// The consumer's state machine alone: batched acks naming partitions, resuming without skipping or repeating.
@testable import HeraldClient
import Testing

@Suite struct SubscriptionStateTests {
    typealias State = SubscriptionState<Int>

    static func delivery(_ cursor: Int64, partition: Int? = nil) -> DeliveryLine {
        var o: [String: HeraldJSON] = ["op": "delivery", "cursor": .int(cursor), "kind": "alert", "user": "u", "app": "a", "at": "x", "reason": "delivered"]
        if let partition { o["partition"] = .int(Int64(partition)) }
        return DeliveryLine.scan(Array(HeraldJSON.object(o).jsonString.utf8))!
    }
    static func lines(_ bytes: [UInt8]) -> [HeraldJSON] {
        bytes.split(separator: 0x0A).compactMap { try? HeraldJSON.parse($0) }
    }
    static func delivered(_ actions: [State.Action]) -> [Int64] {
        actions.flatMap { if case .deliver(_, .success(let d?)) = $0 { return d.map(\.cursor) }; return [] }
    }

    static func started(_ s: inout State) {
        _ = s.connectionEstablished(now: 0)
        var actions: [State.Action] = []
        _ = s.lineReceived(["ok": true, "rid": 1, "op": "subscribe", "cursor": 0], actions: &actions)
    }

    @Test func processedLinesAreAckedEveryNAndTheAckNamesThePartition() {
        var s = State(consumer: "c", start: .earliest, filter: nil, ackEvery: 2, ackIntervalMilliseconds: 1_000)
        let subscribe = Self.lines(s.connectionEstablished(now: 0))
        #expect(subscribe.first?["op"] == "subscribe" && subscribe.first?["from"] == "earliest")
        var actions: [State.Action] = []
        _ = s.lineReceived(["ok": true, "rid": 1, "op": "subscribe", "cursor": 0], actions: &actions)
        for c in [Int64(1), 2, 3] { let d = Self.delivery(c, partition: 3); s.deliveryReceived(d, actions: &actions) }
        actions = []
        for reader in 0..<3 { s.nextRequested(reader: reader, deadline: nil, now: 10, actions: &actions) }
        #expect(Self.delivered(actions) == [1, 2, 3])
        let acks = Self.lines(s.takeOutbox())
        #expect(acks == [["op": "ack", "rid": 2, "consumer": "c", "cursor": 2, "partition": 3]], "after two processed lines")
    }

    /// With manual acks, reading on acks nothing, nor does the close: only `ackRequested` moves
    /// the cursor, and only forward.
    @Test func withManualAcksOnlyAnAckRequestedMovesTheCursor() {
        var s = State(consumer: "c", start: .earliest, filter: nil, ackEvery: 1, ackIntervalMilliseconds: 1_000, manualAcks: true)
        Self.started(&s)
        var actions: [State.Action] = []
        for c in [Int64(1), 2, 3] { let d = Self.delivery(c); s.deliveryReceived(d, actions: &actions) }
        for reader in 0..<3 { s.nextRequested(reader: reader, deadline: nil, now: 10, actions: &actions) }
        s.nextRequested(reader: 3, deadline: nil, now: 10, actions: &actions)
        s.ticked(now: 5_000, actions: &actions)
        #expect(Self.lines(s.takeOutbox()).isEmpty, "three lines read, none acked")
        s.ackRequested(partition: 0, cursor: 2, now: 5_000, actions: &actions)
        s.ackRequested(partition: 0, cursor: 1, now: 5_000, actions: &actions)
        #expect(Self.lines(s.takeOutbox()) == [["op": "ack", "rid": 2, "consumer": "c", "cursor": 2]], "the newest, once")
        #expect(s.closeRequested(now: 5_000, actions: &actions))
        #expect(Self.lines(s.takeOutbox()).isEmpty, "the close acks nothing the reader did not")
    }

    @Test func aReconnectResumesAfterTheLastLineReceivedAndDropsRepeats() {
        var s = State(consumer: "c", start: .committed, filter: nil, ackEvery: 100, ackIntervalMilliseconds: 1_000)
        Self.started(&s)
        var actions: [State.Action] = []
        for c in [Int64(5), 6, 7] { let d = Self.delivery(c); s.deliveryReceived(d, actions: &actions) }
        s.connectionLost()
        let resubscribe = Self.lines(s.connectionEstablished(now: 0))
        #expect(resubscribe.last?["from"] == 7, "after the newest line received, buffered ones included")
        for c in [Int64(7), 8] { let d = Self.delivery(c); s.deliveryReceived(d, actions: &actions) }
        actions = []
        for reader in 0..<4 { s.nextRequested(reader: reader, deadline: nil, now: 0, actions: &actions) }
        #expect(Self.delivered(actions) == [5, 6, 7, 8])
    }

    @Test func withPartitionsAReconnectAcksWhatWasProcessedThenSubscribesFromCommitted() {
        var s = State(consumer: "c", start: .earliest, filter: nil, ackEvery: 100, ackIntervalMilliseconds: 1_000)
        Self.started(&s)
        var actions: [State.Action] = []
        for (c, p) in [(Int64(1), 0), (1, 1), (2, 1)] { let d = Self.delivery(c, partition: p); s.deliveryReceived(d, actions: &actions) }
        for reader in 0..<3 { s.nextRequested(reader: reader, deadline: nil, now: 0, actions: &actions) }
        s.connectionLost()
        let lines = Self.lines(s.connectionEstablished(now: 0))
        #expect(lines.map { $0["op"] } == ["ack", "ack", "subscribe"])
        #expect(lines[0]["partition"] == 0 && lines[0]["cursor"] == 1 && lines[1]["partition"] == 1 && lines[1]["cursor"] == 1)
        #expect(lines[2]["from"] == "committed")
    }

    @Test func aSecondReaderWhileOneWaitsIsRefusedAndTheFirstStillGetsTheNextLine() {
        var s = State(consumer: "c", start: .committed, filter: nil, ackEvery: 10, ackIntervalMilliseconds: 1_000)
        Self.started(&s)
        var actions: [State.Action] = []
        s.nextRequested(reader: 1, deadline: nil, now: 0, actions: &actions)
        s.nextRequested(reader: 2, deadline: nil, now: 0, actions: &actions)
        guard case .deliver(2, .failure(let e))? = actions.first else { Issue.record("\(actions)"); return }
        #expect(e.code == "concurrent_next")
        actions = []
        let d = Self.delivery(1)
        s.deliveryReceived(d, actions: &actions)
        guard case .deliver(1, .success(let got?))? = actions.first else { Issue.record("\(actions)"); return }
        #expect(got.map(\.cursor) == [1])
    }

    @Test func aReaderWaitingPastItsDeadlineGetsATimeout() {
        var s = State(consumer: "c", start: .committed, filter: nil, ackEvery: 10, ackIntervalMilliseconds: 1_000)
        Self.started(&s)
        var actions: [State.Action] = []
        s.nextRequested(reader: 1, deadline: 500, now: 0, actions: &actions)
        s.ticked(now: 499, actions: &actions)
        #expect(actions.isEmpty)
        s.ticked(now: 500, actions: &actions)
        guard case .deliver(1, .failure(let e))? = actions.first else { Issue.record("\(actions)"); return }
        #expect(e.code == "timeout")
    }
}

@Suite struct EphemeralStreamStateTests {
    typealias State = SubscriptionState<Int>

    /// An ephemeral stream says so in its subscribe (a name only when it has one), sends no ack
    /// however many lines are processed, closes without waiting for acks, and after a reconnect
    /// resumes after the newest line received.
    @Test func anEphemeralStreamSubscribesAsOneAcksNothingAndResumesAfterTheLastLine() {
        var unnamed = State(consumer: "", start: .earliest, filter: DeliveryFilter(kinds: [.alert]), ackEvery: 1, ackIntervalMilliseconds: 1, ephemeral: true)
        let subscribe = SubscriptionStateTests.lines(unnamed.connectionEstablished(now: 0))
        #expect(subscribe == [["op": "subscribe", "rid": 1, "ephemeral": true, "from": "earliest", "filter": ["kinds": ["alert"]]]])
        var named = State(consumer: "gw", start: .committed, filter: nil, ackEvery: 1, ackIntervalMilliseconds: 1, ephemeral: true)
        #expect(SubscriptionStateTests.lines(named.connectionEstablished(now: 0)).first?["consumer"] == "gw")

        var actions: [State.Action] = []
        _ = unnamed.lineReceived(["ok": true, "rid": 1, "op": "subscribe", "cursor": 0], actions: &actions)
        for c in [Int64(1), 2, 3] { let d = SubscriptionStateTests.delivery(c); unnamed.deliveryReceived(d, actions: &actions) }
        for reader in 0..<3 { unnamed.nextRequested(reader: reader, deadline: nil, now: 10, actions: &actions) }
        unnamed.ticked(now: 5_000, actions: &actions)
        #expect(unnamed.takeOutbox().isEmpty, "no ack")
        #expect(!unnamed.closeRequested(now: 6_000, actions: &actions) && unnamed.takeOutbox().isEmpty)
        unnamed.connectionLost()
        #expect(SubscriptionStateTests.lines(unnamed.connectionEstablished(now: 7_000)).first?["from"] == 3)
    }
}

@Suite struct DeliveryLineTests {
    typealias State = SubscriptionState<Int>

    /// The scan reads a delivery's routing members and keeps the bytes; what it cannot read plainly
    /// (an escape in `app`, a reply, a goodbye) is left to a full parse, and `decoded()` agrees with it.
    @Test func theScanReadsRoutingMembersAndLeavesTheRestToAFullParse() throws {
        let line = Array(#"{"app":"com.example.mail","content":{"title":"a \"quoted\" }, title"},"cursor":42,"items":[{"app":"x","kind":"no"},[1,2]],"kind":"alert","op":"delivery","partition":3,"user":"u"}"#.utf8)
        let d = try #require(DeliveryLine.scan(line))
        #expect(d.partition == 3 && d.cursor == 42 && d.app == "com.example.mail" && d.kind == .alert && d.namesPartition && d.bytes == line)
        let full = try d.decoded()
        #expect(full.cursor == 42 && full.partition == 3 && full.content?.title == #"a "quoted" }, title"#)
        #expect(DeliveryLine.scan(Array(#"{"app":null,"cursor":7,"kind":"summary","op":"delivery"}"#.utf8)).map { [$0.app == nil, $0.partition == 0, !$0.namesPartition] } == [true, true, true])
        #expect(DeliveryLine.scan(Array(#"{"app":"a\u0041","cursor":7,"kind":"alert","op":"delivery"}"#.utf8)) == nil, "an escape: parsed in full")
        #expect(DeliveryLine.scan(Array(#"{"cursor":7,"ok":true,"op":"ack","rid":3}"#.utf8)) == nil, "a reply")
        #expect(DeliveryLine.scan(Array(#"{"op":"goodbye","reason":"shutdown"}"#.utf8)) == nil)
        #expect(DeliveryLine.scan(Array(#"{"cursor":1.5,"op":"delivery"}"#.utf8)) == nil && DeliveryLine.scan(Array(#"{"cursor":1,"op":"delivery""#.utf8)) == nil)
        #expect(throws: HeraldError.self) { try DeliveryLine(partition: 0, cursor: 1, app: nil, kind: .alert, bytes: Array("{oops".utf8), namesPartition: false).decoded() }
    }

    /// A reader asking for lines gets every buffered one up to its limit, in order; asking again
    /// makes them all processed, and the acks name each partition's newest.
    @Test func aBatchOfLinesIsHandedOutInOrderAndProcessedAsAWhole() {
        var s = State(consumer: "c", start: .earliest, filter: nil, ackEvery: 3, ackIntervalMilliseconds: 1_000)
        SubscriptionStateTests.started(&s)
        var actions: [State.Action] = []
        for (c, p) in [(Int64(1), 0), (1, 1), (2, 0), (3, 0)] { s.deliveryReceived(SubscriptionStateTests.delivery(c, partition: p), actions: &actions) }
        s.nextRequested(reader: 1, most: 3, deadline: nil, now: 0, actions: &actions)
        #expect(SubscriptionStateTests.delivered(actions) == [1, 1, 2])
        #expect(SubscriptionStateTests.lines(s.takeOutbox()).isEmpty, "nothing processed yet")
        actions = []
        s.nextRequested(reader: 2, most: 3, deadline: nil, now: 0, actions: &actions)
        #expect(SubscriptionStateTests.delivered(actions) == [3])
        let acks = SubscriptionStateTests.lines(s.takeOutbox())
        #expect(acks.map { [$0["partition"], $0["cursor"]] } == [[0, 2], [1, 1]], "three lines processed: each partition's newest")
    }
}
