// A closed-loop load of pipelined submits over TCP: N producer connections, each keeping W requests outstanding.
import Foundation
import HeraldCore
import HeraldStore
import Synchronization

/// The producer side of `herald bench ingest`: realistic ~300-byte submits over many users,
/// each acknowledged only after COMMIT; measures acks/s and ack latency.
public struct IngestLoad: Sendable {
    public var producers = 8
    public var events = 100_000
    public var window = 256
    public var users = 10_000
    public var app = "com.example.mail"
    public var idPrefix = "bench"

    public init() {}

    public struct Result: Sendable {
        public var acked: Int
        public var seconds: Double
        public var latenciesMs: [Double]   // sorted
        public var acksPerSecond: Double { Double(acked) / seconds }
        public func percentile(_ p: Double) -> Double {
            latenciesMs.isEmpty ? 0 : latenciesMs[min(latenciesMs.count - 1, Int(Double(latenciesMs.count) * p))]
        }
    }

    /// Registers the app and authorizes every user (so submits are decided, not suppressed).
    public func prepare(port: Int) throws {
        let c = try WireClient(port: port)
        _ = try c.request(#"{"op":"hello"}"#)
        try c.send(#"{"op":"registerApp","app":"\#(app)","entitlements":[]}"#)
        for u in 0..<users {
            try c.send(#"{"op":"authorization","user":"user-\#(u)","app":"\#(app)","status":"authorized","options":["alert","sound","badge"]}"#)
        }
        for _ in 0...users { _ = try c.readJSON(timeoutMilliseconds: 120_000) }
    }

    /// The rows the service stores for this load (for the COPY baseline of the same data).
    public func rows() -> [EventRow] {
        (0..<events).map { i in
            EventRow(user: "user-\(i % users)", type: "submit", app: app, notificationId: "\(idPrefix)-\(i)",
                     body: line(i), engineTime: Instant(millisecondsSinceEpoch: 1_780_000_000_000 + Int64(i)))
        }
    }

    /// One submit line.
    public func line(_ i: Int) -> String {
        #"{"op":"submit","id":"\#(idPrefix)-\#(i)","app":"\#(app)","user":"user-\#(i % users)","title":"Order shipped","body":"Your order #\#(i) has shipped and will arrive on Tuesday between 9 and 12. Track it in the app.","hiddenPreviewsBodyPlaceholder":"Order update","threadId":"orders","interruptionLevel":"active"}"#
    }

    public func run(port: Int, progress: @escaping @Sendable (Int) -> Void = { _ in }) throws -> Result {
        let perProducer = events / producers
        let results = Mutex<[(Int, [Double])]>([])
        let failure = Mutex<String?>(nil)
        let ackedSoFar = Atomic<Int>(0)
        let started = Date()
        DispatchQueue.concurrentPerform(iterations: producers) { p in
            do {
                let c = try WireClient(port: port)
                _ = try c.request(#"{"op":"hello"}"#)
                var sendTimes: [Double] = []
                sendTimes.reserveCapacity(perProducer)
                var latencies: [Double] = []
                latencies.reserveCapacity(perProducer)
                var sent = 0, received = 0
                let base = p * perProducer
                while received < perProducer {
                    var chunk = ""
                    while sent < perProducer && sent - received < window {
                        chunk += line(base + sent) + "\n"
                        sendTimes.append(Date().timeIntervalSince(started))
                        sent += 1
                    }
                    if !chunk.isEmpty { try c.sendRaw(Array(chunk.utf8)) }
                    let reply = try c.readJSON(timeoutMilliseconds: 60_000)
                    guard reply["ok"] == true else { throw WireClient.Failure.io("refused: \(reply.canonicalString)") }
                    latencies.append((Date().timeIntervalSince(started) - sendTimes[received]) * 1000)
                    received += 1
                    let total = ackedSoFar.add(1, ordering: .relaxed).newValue
                    if total % 10_000 == 0 { progress(total) }
                }
                results.withLock { $0.append((received, latencies)) }
            } catch {
                failure.withLock { $0 = "producer \(p): \(error)" }
            }
        }
        let seconds = Date().timeIntervalSince(started)
        if let f = failure.withLock({ $0 }) { throw WireClient.Failure.io(f) }
        let all = results.withLock { $0 }
        return Result(acked: all.map(\.0).reduce(0, +), seconds: seconds, latenciesMs: all.flatMap(\.1).sorted())
    }
}
