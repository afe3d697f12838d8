// The erasure bench (issue 45): how long `erase` takes for a user with many notifications.
import Foundation
import HeraldCore
@testable import HeraldRuntime
import HeraldTestSupport
import Testing

@Suite struct ErasureTimeBenchTests {
    static var notifications: Int? { ProcessInfo.processInfo.environment["HERALD_ERASURE_BENCH_NOTIFICATIONS"].flatMap { Int($0) } }

    /// A user with N notifications (pipelined submits, half of them deferred so their content waits
    /// in memory) is erased by the admin op; prints the op's round trip beside a user with 10.
    /// BENCHMARKS.md, "Erasure".
    @Test(.enabled(if: notifications != nil, "set HERALD_ERASURE_BENCH_NOTIFICATIONS to run the erasure-time bench"))
    func erasure_timeForAUserWithManyNotifications() throws {
        let n = Self.notifications ?? 0
        let server = try TestServer(start: "2026-03-27T07:00:00Z")
        defer { server.stop() }
        let c = try server.client()
        #expect(try c.call(["op": "registerApp", "app": "com.example.mail", "entitlements": []])["ok"] == true)
        for user in ["many", "few"] {
            #expect(try c.call(["op": "authorization", "user": .string(user), "app": "com.example.mail", "status": "authorized",
                                "options": ["alert", "sound", "badge"]])["ok"] == true)
        }
        func submits(_ user: String, _ count: Int) throws {
            let window = 256
            var sent = 0, answered = 0
            while answered < count {
                while sent < count && sent - answered < window {
                    var o: [String: JSONValue] = ["op": "submit", "id": .string("\(user)-\(sent)"), "app": "com.example.mail", "user": .string(user),
                                                  "title": .string("Order \(sent) shipped"), "body": "Your parcel is on its way",
                                                  "hiddenPreviewsBodyPlaceholder": "Order"]
                    if sent % 2 == 1 { o["deliverAt"] = "2026-03-28T07:00:00Z" }
                    try c.sendRaw(WireReply.line(.object(o)))
                    sent += 1
                }
                let reply = try c.readJSON()
                #expect(reply["ok"] == true, "\(reply.canonicalString)")
                answered += 1
            }
        }
        try submits("many", n)
        try submits("few", 10)
        func timed(_ user: String) throws -> Double {
            let start = ContinuousClock.now
            let r = try c.call(["op": "erase", "user": .string(user)])
            #expect(r["ok"] == true, "\(r.canonicalString)")
            let d = ContinuousClock.now - start
            return Double(d.components.seconds) * 1000 + Double(d.components.attoseconds) / 1e15
        }
        let few = try timed("few")
        let many = try timed("many")
        print("erasure: a user with \(n) notifications \(String(format: "%.1f", many)) ms; with 10 \(String(format: "%.1f", few)) ms")
    }
}
