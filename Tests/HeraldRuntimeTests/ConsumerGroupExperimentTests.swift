// SPEC §9 consumer groups across cluster members: partitions divided, a killed member's resumed by the others.
import Foundation
import Glibc
import HeraldCore
import HeraldStore
import HeraldTestSupport
import HeraldWireTesting
import Testing

@Suite(.serialized) struct ConsumerGroupExperimentTests {
    /// The checker is shown to catch what it is for: a cursor no member got, a line the departed
    /// member had acknowledged delivered again to another, two members of a stable group sharing
    /// a partition.
    @Test func theCheckerCatchesASkippedCursorARedeliveryOfAnAcknowledgedLineAndASharedPartition() {
        var a = ConsumerGroupChecker.Member(name: "a"), b = ConsumerGroupChecker.Member(name: "b")
        a.received = [(0, 1, 1), (0, 2, 2), (0, 3, 3)]
        a.confirmed = [(0, 2, 4)]
        b.received = [(0, 3, 5), (0, 4, 6)]
        let checker = ConsumerGroupChecker()
        #expect(checker.faults([a, b], heads: [0: 4], departed: 0).isEmpty, "3 was not acknowledged by a: b may have it again")
        #expect(checker.faults([a, b], heads: [0: 5], departed: 0).contains { $0.contains("reached no member") })
        #expect(checker.faults([a, b], heads: [0: 4], stable: true).contains { $0.contains("stable group") })
        b.received.insert((0, 2, 4.5), at: 0)
        #expect(checker.faults([a, b], heads: [0: 4], departed: 0).contains { $0.contains("b received 1 line(s) a had acknowledged") })
    }

    /// Experiment 3: a consumer group of three connections on two cluster members (P = 8). The
    /// partitions are divided 3/3/2 and each reaches one member while the group is stable; one
    /// member stops acknowledging and is killed (its socket closed) with lines unacknowledged:
    /// its partitions go on at the two others from the acknowledged cursors — nothing skipped,
    /// redelivered only after the last confirmed ack — and end divided 4/4, every cursor acked.
    @Test func aKilledGroupMembersPartitionsResumeAtTheOthersFromTheAcknowledgedCursors() throws {
        let cluster = try TestCluster(partitions: 8)
        let a = try cluster.start("a")
        try cluster.waitUntilEveryPartitionIsServed(via: a)
        let b = try cluster.start("b")
        try cluster.waitUntilBalanced(via: b, [4, 4])
        let users = (0..<64).map { "group-\($0)" }
        let producer = try cluster.producer(via: a, users: users)
        let admin = try WireClient(port: b.port)
        _ = try admin.request(#"{"op":"hello"}"#)

        var group = try [("g1", a), ("g2", b), ("g3", a)].map { try GroupConsumer(name: $0.0, port: $0.1.port) }
        try GroupConsumer.waitForShares([2, 3, 3], admin: admin)

        func submit(_ range: Range<Int>) throws {
            for i in range {
                let ack = try producer.request(#"{"op":"submit","app":"com.example.cluster","id":"g\#(i)","user":"\#(users[i % users.count])","title":"t"}"#)
                #expect(ack["ok"] == true, "\(ack)")
            }
        }
        let db = try PGConnection.connect(cluster.url)
        defer { db.close() }
        func heads() throws -> [Int: Int64] {
            let r = try db.execute("SELECT partition, max(cursor) FROM deliveries GROUP BY partition")
            return Dictionary(uniqueKeysWithValues: (0..<r.rowCount).map { (Int(r.int64($0, 0)!), r.int64($0, 1)!) })
        }
        func pumpUntilEveryCursorReachedSomeone(_ members: [GroupConsumer]) throws {
            let deadline = Date().addingTimeInterval(60)
            while Date() < deadline {
                for m in members where !m.closed { try m.pump() }
                let want = try heads()
                let got = members.reduce(into: [Int: Set<Int64>]()) { acc, m in
                    for r in m.view.received { acc[r.partition, default: []].insert(r.cursor) }
                }
                if want.allSatisfy({ p, head in (got[p]?.count ?? 0) >= Int(head) }),
                   members.filter({ !$0.closed }).allSatisfy({ $0.unanswered == 0 }) { return }
            }
            throw ExperimentError("deliveries did not all reach the group in 60 s")
        }

        try submit(0..<160)
        try pumpUntilEveryCursorReachedSomeone(group)
        let stableFaults = ConsumerGroupChecker().faults(group.map(\.view), heads: try heads(), stable: true)
        #expect(stableFaults.isEmpty, "\(stableFaults.prefix(10))")

        // g2 stops acknowledging, receives some lines, and dies with them unacknowledged.
        let victim = group[1]
        victim.acking = false
        let before = victim.view.received.count
        try submit(160..<320)
        let deadline = Date().addingTimeInterval(30)
        while victim.view.received.count < before + 10, Date() < deadline { try victim.pump() }
        #expect(victim.view.received.count >= before + 10, "the victim streams its partitions")
        victim.kill()
        try GroupConsumer.waitForShares([4, 4], admin: admin)
        // The survivors go on until every cursor is acknowledged: the victim's unacknowledged
        // lines included, which only a redelivery brings them.
        func lag() throws -> Int64 { try db.execute("SELECT coalesce(sum(lag), -1) FROM herald_consumer_lag WHERE consumer = 'grp'").int64(0, 0) ?? -1 }
        let drained = Date().addingTimeInterval(60)
        while try lag() != 0, Date() < drained {
            for m in group where !m.closed { try m.pump() }
        }

        let faults = ConsumerGroupChecker().faults(group.map(\.view), heads: try heads(), departed: 1)
        #expect(faults.isEmpty, "\(faults.prefix(10))")
        let victimAcked = Dictionary(victim.view.confirmed.map { ($0.partition, $0.cursor) }, uniquingKeysWith: max)
        let redelivered = victim.view.received.filter { r in
            r.cursor > (victimAcked[r.partition] ?? 0) && group.contains { $0 !== victim && $0.view.received.contains { $0.partition == r.partition && $0.cursor == r.cursor } }
        }
        #expect(!redelivered.isEmpty, "the victim's unacknowledged lines went to the others")
        #expect(try lag() == 0, "every cursor acknowledged by the survivors")
        print("consumer group: \(group.map { "\($0.view.name) \($0.view.received.count) lines" }.joined(separator: ", ")); "
              + "\(redelivered.count) of the killed member's unacknowledged lines redelivered")
        group.removeAll()
    }
}

/// One member of the group "grp" on a raw connection: records each delivery line and each
/// confirmed ack with the time it was read; acks every line at once while `acking`.
final class GroupConsumer {
    let client: WireClient
    var view: ConsumerGroupChecker.Member
    var acking = true
    private(set) var closed = false
    private var sentAcks: [(partition: Int, cursor: Int64)] = []
    var unanswered: Int { sentAcks.count }
    static let clock = ContinuousClock.now

    init(name: String, port: Int) throws {
        client = try WireClient(port: port)
        view = ConsumerGroupChecker.Member(name: name)
        _ = try client.request(#"{"op":"hello"}"#)
        let subscribed = try client.request(#"{"op":"subscribe","consumer":"grp"}"#)
        guard subscribed["ok"] == true else { throw ExperimentError("subscribe: \(subscribed)") }
    }

    static func now() -> Double {
        let d = ContinuousClock.now - clock
        return Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }

    /// Reads what has come (up to 20 ms of waiting), acking each delivery line while `acking`.
    func pump() throws {
        while let line = try client.readLine(timeoutMilliseconds: 20) {
            let json = try JSONValue.parse(line)
            let at = Self.now()
            if json["op"] == "delivery", let p = json["partition"]?.intValue, let c = json["cursor"]?.intValue {
                view.received.append((Int(p), c, at))
                if acking {
                    try client.sendRaw(Array(#"{"op":"ack","consumer":"grp","partition":\#(p),"cursor":\#(c)}"#.utf8) + [0x0A])
                    sentAcks.append((Int(p), c))
                }
            } else if json["ok"] != nil, !sentAcks.isEmpty {
                let sent = sentAcks.removeFirst()
                if json["ok"] == true { view.confirmed.append((sent.partition, json["cursor"]?.intValue ?? sent.cursor, at)) }
            }
        }
    }

    /// Gone without a word: its socket closed with lines unacknowledged.
    func kill() {
        client.close()
        closed = true
    }

    /// Waits until the group's members (the `consumers` op through a router) stream `shares`
    /// partitions each (sorted).
    static func waitForShares(_ shares: [Int], admin: WireClient) throws {
        let deadline = Date().addingTimeInterval(30)
        var last = JSONValue.null
        while Date() < deadline {
            last = try admin.request(#"{"op":"consumers"}"#)
            let grp = last["consumers"]?.arrayValue?.first { $0["consumer"] == "grp" }
            let counts = (grp?["members"]?.arrayValue ?? []).map { $0["partitions"]?.arrayValue?.count ?? 0 }.sorted()
            if counts == shares { return }
            usleep(50_000)
        }
        throw ExperimentError("the group's shares are not \(shares): \(last.canonicalString)")
    }
}
