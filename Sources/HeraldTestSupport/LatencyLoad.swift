// A paced load with a subscribed consumer: latency from each submit's send to its delivery line at the consumer.
import Foundation
import HeraldCore
import Synchronization

/// The end-to-end scenario of `herald bench latency`: one producer sends submits at a fixed
/// offered rate (not as fast as it can), a consumer is subscribed at the tail, and each
/// notification's latency is the time from its send to its delivery line arriving.
public struct LatencyLoad: Sendable {
    public var events = 20_000
    public var ratePerSecond = 4_000.0
    public var ingest = IngestLoad()

    public init() { ingest.idPrefix = "lat" }

    public struct Result: Sendable {
        public var delivered: Int
        public var seconds: Double
        public var latenciesMs: [Double]  // sorted
        public func percentile(_ p: Double) -> Double {
            latenciesMs.isEmpty ? 0 : latenciesMs[min(latenciesMs.count - 1, Int(Double(latenciesMs.count) * p))]
        }
    }

    public func run(port: Int) throws -> Result {
        let consumer = try WireClient(port: port)
        _ = try consumer.request(#"{"op":"hello"}"#)
        _ = try consumer.request(#"{"op":"subscribe","consumer":"bench-latency"}"#)
        let producer = try WireClient(port: port)
        _ = try producer.request(#"{"op":"hello"}"#)

        let started = Date()
        let sendTimes = Mutex([Double](repeating: 0, count: events))
        let failure = Mutex<String?>(nil)
        let ackReader = Thread {
            do { for _ in 0..<events { _ = try producer.readJSON(timeoutMilliseconds: 60_000) } }
            catch { failure.withLock { $0 = "acks: \(error)" } }
        }
        ackReader.start()
        let sender = Thread {
            do {
                for i in 0..<events {
                    let due = Double(i) / ratePerSecond
                    let wait = due - Date().timeIntervalSince(started)
                    if wait > 0 { usleep(UInt32(wait * 1_000_000)) }
                    sendTimes.withLock { $0[i] = Date().timeIntervalSince(started) }
                    try producer.send(ingest.line(i))
                }
            } catch { failure.withLock { $0 = "send: \(error)" } }
        }
        sender.start()

        var latencies: [Double] = []
        latencies.reserveCapacity(events)
        let prefix = ingest.idPrefix + "-"
        while latencies.count < events {
            let d = try consumer.readJSON(timeoutMilliseconds: 60_000)
            guard d["op"] == "delivery", let id = d["notification"]?.stringValue, id.hasPrefix(prefix),
                  let i = Int(id.dropFirst(prefix.count)), i < events else { continue }
            let now = Date().timeIntervalSince(started)
            latencies.append((now - sendTimes.withLock { $0[i] }) * 1000)
        }
        if let f = failure.withLock({ $0 }) { throw WireClient.Failure.io(f) }
        return Result(delivered: latencies.count, seconds: Date().timeIntervalSince(started), latenciesMs: latencies.sorted())
    }
}
