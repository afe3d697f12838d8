// A rough parse-throughput check on notification-sized objects (printed, never asserted).
import Foundation
import Testing
import HeraldCore

/// A typical ~300-byte `submit` request.
private let sampleNotificationJSON = #"{"op":"submit","rid":42,"id":"n-0001234","app":"com.example.mail","user":"user-8812","interruptionLevel":"active","title":"New message from Anna","body":"Are we still on for lunch tomorrow at 12:30? I booked the usual place.","threadId":"t-77","relevanceScore":0.5,"deliverAt":"2026-03-29T01:30:00Z","data":{"k":[1,2,3]}}"#

@Suite struct JSONThroughputTests {
    @Test func parseThroughputOnNotificationObjectsIsPrinted() throws {
        let bytes = Array(sampleNotificationJSON.utf8)
        let n = 20_000
        let clock = ContinuousClock()
        var keys = 0
        let ours = try clock.measure {
            for _ in 0..<n { keys &+= try JSONValue.parse(bytes).objectValue!.count }
        }
        let data = Data(bytes)
        let foundation = try clock.measure {
            for _ in 0..<n { keys &+= (try JSONSerialization.jsonObject(with: data) as! [String: Any]).count }
        }
        func rate(_ d: Duration) -> Int { Int(Double(n) / (Double(d.components.seconds) + Double(d.components.attoseconds) * 1e-18)) }
        #if DEBUG
        let build = "debug build, unoptimised: not representative; release numbers are in docs/json.md"
        #else
        let build = "optimised build"
        #endif
        print("JSON throughput (\(bytes.count)-byte objects, \(build)): JSONValue.parse \(rate(ours))/s, JSONSerialization \(rate(foundation))/s")
        #expect(keys == 2 * n * 12)
    }
}
