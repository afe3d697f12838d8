// Under the system clock, a step of the wall clock by ±1 h fires nothing early.
import Foundation
import HeraldCore
import HeraldRuntime
import HeraldTestSupport
import Testing

/// A wall clock the test sets by hand, read by the service's loop thread.
final class SteppableWallClock: @unchecked Sendable {
    // Why @unchecked Sendable: `now` is only touched while holding `lock`.
    private let lock = NSLock()
    private var now: Instant
    init(_ start: String) { now = Instant(rfc3339: start)! }
    func read() -> Instant { lock.withLock { now } }
    func set(_ text: String) { lock.withLock { now = Instant(rfc3339: text)! } }
}

@Suite struct WallClockStepTests {
    static let mail = "com.example.mail"

    @Test func wallClockStepsOfAnHourFireNothingEarlyAndSkippedTimersOnceWithTheirOwnInstants() throws {
        let wall = SteppableWallClock("2026-03-27T07:00:00Z")
        let log = LogLines()
        let server = try TestServer(log: log) { config in
            config.clock = .system
            config.wallClock = { wall.read() }
        }
        defer { server.stop() }
        let c = try server.client()
        let consumer = try server.client()
        #expect(try consumer.call(["op": "subscribe", "consumer": "watch", "from": "earliest"])["ok"] == true)
        #expect(try c.call(["op": "registerApp", "app": .string(Self.mail), "entitlements": []])["ok"] == true)
        for user in ["alice", "bob"] {
            #expect(try c.call(["op": "authorization", "user": .string(user), "app": .string(Self.mail), "status": "authorized",
                                "options": ["alert"]])["ok"] == true)
        }
        func submit(_ user: String, _ id: String, deliverAt: String? = nil) throws {
            var o: [String: JSONValue] = ["op": "submit", "app": .string(Self.mail), "user": .string(user), "id": .string(id),
                                          "title": "Hi", "hiddenPreviewsBodyPlaceholder": "x"]
            if let deliverAt { o["deliverAt"] = .string(deliverAt) }
            #expect(try c.call(.object(o))["ok"] == true)
        }
        try submit("alice", "at-0730", deliverAt: "2026-03-27T07:30:00Z")
        try submit("alice", "at-0830", deliverAt: "2026-03-27T08:30:00Z")

        // One hour back: engine time holds at 07:00; nothing is due, nothing fires.
        wall.set("2026-03-27T06:00:00Z")
        try submit("bob", "marker-1")
        #expect(try c.call(["op": "stats"])["now"] == "2026-03-27T07:00:00Z", "engine time never goes back")
        wall.set("2026-03-27T06:59:00Z")
        try submit("bob", "marker-2")
        // One hour forward from 07:10: 07:30 was skipped over and fires once, with its own instant; 08:30 does not.
        wall.set("2026-03-27T07:10:00Z")
        try submit("bob", "marker-3")
        wall.set("2026-03-27T08:10:00Z")
        try submit("bob", "marker-4")
        try submit("bob", "marker-5")

        let seen = try consumer.deliveries(6).map { ($0["notification"]?.stringValue ?? "", $0["at"]?.stringValue ?? "") }
        let order = seen.map(\.0)
        #expect(order.filter { $0 == "at-0730" }.count == 1, "fired exactly once: \(order)")
        #expect(!order.contains("at-0830"), "08:30 is not due at 08:10: \(order)")
        let fired = try #require(order.firstIndex(of: "at-0730"))
        #expect(fired > order.firstIndex(of: "marker-3")!, "not fired before the wall clock passed 07:30: \(order)")
        #expect(seen[fired].1 == "2026-03-27T07:30:00Z", "its decision carries its own instant")
        #expect(seen.first { $0.0 == "marker-1" }?.1 == "2026-03-27T07:00:00Z", "events after the backward step take the held engine time")
        #expect(!log.matching("warning:", "wall clock went back").isEmpty, "the backward step is logged: \(log.all)")
        #expect(!log.matching("warning:", "wall clock jumped forward 3600 s to 2026-03-27T08:10:00Z").isEmpty, "the forward step is logged: \(log.all)")
    }
}
