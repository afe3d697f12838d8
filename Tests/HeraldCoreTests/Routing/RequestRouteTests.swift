// SPEC §9 routing: where a router sends each request, decided from its op and fields alone.
import HeraldCore
import Testing

@Suite struct RequestRouteTests {
    let p4 = Partitioning(count: 4)

    func route(_ line: String) -> RequestRoute {
        guard case .object(var o)? = try? JSONValue.parse(Array(line.utf8)), let op = o.removeValue(forKey: "op")?.stringValue.flatMap(Op.init(named:)) else {
            Issue.record("not a request: \(line)")
            return .router
        }
        o["rid"] = nil
        return RequestRoute.of(op, body: .object(o), partitioning: p4)
    }

    @Test func aUsersRequestGoesToTheUsersPartition() {
        for user in ["alice", "bob", "carol", "ü"] {
            let p = p4.partition(of: user)
            #expect(route(#"{"op":"submit","app":"a","id":"1","user":"\#(user)"}"#) == .partition(p))
            #expect(route(#"{"op":"settings","user":"\#(user)","alert":false}"#) == .partition(p))
            #expect(route(#"{"op":"erase","user":"\#(user)"}"#) == .partition(p))
            #expect(route(#"{"op":"withdraw","app":"a","id":"1","user":"\#(user)"}"#) == .partition(p))
        }
    }

    @Test func aFanOutWithinOnePartitionIsNotSplit() {
        let same = (0..<200).map { "u\($0)" }.filter { p4.partition(of: $0) == 2 }.prefix(3)
        let list = same.map { "\"\($0)\"" }.joined(separator: ",")
        #expect(route(#"{"op":"submit","app":"a","id":"1","users":[\#(list)]}"#) == .partition(2))
    }

    @Test func aFanOutAcrossPartitionsIsSplitInAscendingPartitionsKeepingRequestOrder() {
        let users = (0..<12).map { "u\($0)" }
        let list = users.map { "\"\($0)\"" }.joined(separator: ",")
        guard case .split(let parts) = route(#"{"op":"submit","app":"a","id":"1","users":[\#(list)]}"#) else {
            Issue.record("not split")
            return
        }
        #expect(parts.map(\.partition) == parts.map(\.partition).sorted())
        #expect(parts.flatMap(\.users).sorted() == users.sorted())
        for part in parts {
            #expect(part.users.allSatisfy { p4.partition(of: $0) == part.partition })
            #expect(part.users == users.filter { p4.partition(of: $0) == part.partition })
        }
    }

    @Test func opsEveryPartitionRecordsGoToEveryPartition() {
        #expect(route(#"{"op":"registerApp","app":"a","entitlements":[]}"#) == .everyPartition)
        #expect(route(#"{"op":"clock","advanceTo":"2026-01-01T00:00:00Z"}"#) == .everyPartition)
        #expect(route(#"{"op":"withdraw","app":"a","id":"1"}"#) == .everyPartition)
        #expect(route(#"{"op":"consumers"}"#) == .everyPartition)
        #expect(route(#"{"op":"deleteConsumer","consumer":"c"}"#) == .everyPartition)
    }

    /// A request malformed for routing goes to partition 0, whose service refuses it exactly as a
    /// single instance would (the router never writes its own version of a door error).
    @Test func aRequestMalformedForRoutingGoesToPartitionZero() {
        #expect(route(#"{"op":"submit","app":"a","id":"1"}"#) == .partition(0))
        #expect(route(#"{"op":"submit","app":"a","id":"1","user":7}"#) == .partition(0))
        #expect(route(#"{"op":"submit","app":"a","id":"1","users":["a",7]}"#) == .partition(0))
        #expect(route(#"{"op":"submit","app":"a","id":"1","users":[]}"#) == .partition(0))
        #expect(route(#"{"op":"submit","app":"a","id":"1","user":"x","users":["y"]}"#) == .partition(0))
        #expect(route(#"{"op":"mute","app":"a"}"#) == .partition(0))
    }

    @Test func acksNameTheirPartitionAndSubscribeAndStatsStayWithTheRouter() {
        #expect(route(#"{"op":"ack","consumer":"c","partition":3,"cursor":9}"#) == .ack(partition: 3))
        #expect(route(#"{"op":"ack","consumer":"c","cursor":9}"#) == .ack(partition: 0))
        #expect(route(#"{"op":"ack","consumer":"c","partition":9,"cursor":9}"#) == .ack(partition: 0))
        #expect(route(#"{"op":"subscribe","consumer":"c"}"#) == .subscribe)
        #expect(route(#"{"op":"stats"}"#) == .router)
    }
}
