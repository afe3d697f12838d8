// `herald bench consumers`: the service's loop CPU per delivery streamed to a filtered consumer, beside an unfiltered one.
import ArgumentParser
import Foundation
import HeraldCommandLine
import HeraldCore
import HeraldRuntime
import HeraldStore
import HeraldTestSupport

struct ConsumerBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "consumers",
        abstract: "Loop CPU per delivery streamed to consumers with and without a subscribe filter, from memory and from PostgreSQL.",
        discussion: """
            Builds a log of N deliveries (submits cycling over mail/alice and chat/alice, alerts, and mail/bob, \
            suppressed: bob never authorized), then streams it from `earliest` to fresh consumers, one at a time, \
            interleaved --runs times: unfiltered (the baseline), a filter that passes every line (apps mail and chat), \
            and one that passes a third (kinds suppressed). Each is timed by the loop thread's CPU (`stats` \
            loopCpuMs) per delivery of the log, so a filter's cost shows beside the unfiltered stream of the same \
            lines. First from the in-memory ring (every delivery fits), then after a restart, whose ring is \
            empty: every line read from PostgreSQL.
            """)

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var fresh: FreshDatabaseOption
    @Option(help: "Deliveries in the log.") var deliveries = 100_000
    @Option(help: "Interleaved rounds of the three consumers (the median is reported).") var runs = 3
    @Flag(help: "Print JSON instead of a table.") var json = false

    static let mail = "com.example.mail", chat = "com.example.chat"

    /// One consumer's stream: subscribes `from` earliest with `filter`, reads `expected` lines,
    /// returns the loop CPU milliseconds and wall seconds it took.
    static func stream(port: Int, name: String, filter: JSONValue?, expected: Int) throws -> (cpuMs: Int64, seconds: Double) {
        let control = try WireClient(port: port)
        _ = try control.request(#"{"op":"hello","token":""}"#)
        let consumer = try WireClient(port: port)
        _ = try consumer.request(#"{"op":"hello","token":""}"#)
        let cpu0 = try control.request(#"{"op":"stats"}"#)["loopCpuMs"]?.intValue ?? 0
        let t0 = Date()
        var sub: [String: JSONValue] = ["op": "subscribe", "consumer": .string(name), "from": "earliest"]
        if let filter { sub["filter"] = filter }
        let reply = try consumer.request(JSONValue.object(sub).canonicalString)
        guard reply["ok"]?.boolValue == true else { throw StoreError.configuration("subscribe refused: \(reply.canonicalString)") }
        var got = 0, last: [UInt8] = []
        while got < expected {
            guard let line = try consumer.readLine(timeoutMilliseconds: 30_000) else {
                throw StoreError.configuration("\(name): \(got) of \(expected) lines, then nothing for 30 s")
            }
            got += 1
            last = line
        }
        let seconds = Date().timeIntervalSince(t0)
        let cpu1 = try control.request(#"{"op":"stats"}"#)["loopCpuMs"]?.intValue ?? 0
        // Acknowledge the last line: the filtered consumers' cursors then move to the head.
        if let cursor = try? JSONValue.parse(last)["cursor"]?.intValue {
            try consumer.send(#"{"op":"ack","consumer":\#(JSONValue.string(name).canonicalString),"cursor":\#(cursor)}"#)
            _ = try consumer.readLine(timeoutMilliseconds: 10_000)
        }
        consumer.close()
        control.close()
        return (cpu1 - cpu0, seconds)
    }

    func run() throws {
        try reportingErrors {
            let location = try database.resolve(fresh: fresh)
            defer { location.close() }
            let url = try scratchDatabase(location, name: "herald_bench_consumers")
            let modes: [(label: String, filter: JSONValue?, share: (Int) -> Int)] = [
                ("unfiltered", nil, { $0 }),
                ("filter passing every line (apps mail, chat)", ["apps": .array([.string(Self.mail), .string(Self.chat)])], { $0 }),
                ("filter passing a third (kinds suppressed)", ["kinds": ["suppressed"]], { n in (0..<n).filter { $0 % 3 == 2 }.count }),
            ]
            var results: [String: [String: [Double]]] = [:]
            var head = 0
            for path in ["ring", "postgres"] {
                try withInProcessService(url: url, configure: {
                    $0.clock = .manual(start: Instant(rfc3339: "2026-11-23T06:00:00Z")!)
                    $0.deliveryRingCapacity = max(deliveries + 1, 65_536)
                }) { port in
                    if path == "ring" {
                        head = try Self.load(port: port, deliveries: deliveries)
                    }
                    for round in 0..<runs {
                        for (i, mode) in modes.enumerated() {
                            let r = try Self.stream(port: port, name: "\(path)-\(round)-\(i)", filter: mode.filter, expected: mode.share(head))
                            results[path, default: [:]][mode.label, default: []].append(Double(r.cpuMs) * 1000 / Double(head))
                            Log.info("consumers: \(path), \(mode.label): \(r.cpuMs) ms loop CPU, \(String(format: "%.2f", r.seconds)) s")
                        }
                    }
                }
            }
            func median(_ v: [Double]) -> Double { let s = v.sorted(); return s[s.count / 2] }
            if json {
                var o: [String: JSONValue] = ["deliveries": .int(Int64(head))]
                for (path, byMode) in results {
                    for (i, mode) in modes.enumerated() {
                        o["\(path).\(["unfiltered", "filterAll", "filterThird"][i])LoopMicrosecondsPerDelivery"] = .double((median(byMode[mode.label]!) * 100).rounded() / 100)
                    }
                }
                print(JSONValue.object(o).canonicalString)
                return
            }
            print("consumers: \(head) deliveries streamed from earliest, loop CPU per delivery of the log (median of \(runs))")
            for path in ["ring", "postgres"] {
                print("  from \(path == "ring" ? "the in-memory ring" : "PostgreSQL (after a restart)"):")
                let base = median(results[path]![modes[0].label]!)
                for mode in modes {
                    let v = median(results[path]![mode.label]!)
                    print(String(format: "    %-46@ %6.2f µs   ratio %.2f×", mode.label as NSString, v, v / base))
                }
            }
        }
    }

    /// Submits `deliveries` notifications (one delivery each) pipelined on one connection; returns the head.
    static func load(port: Int, deliveries: Int) throws -> Int {
        let c = try WireClient(port: port)
        _ = try c.request(#"{"op":"hello","token":""}"#)
        for app in [mail, chat] {
            _ = try c.request(#"{"op":"registerApp","app":"\#(app)","entitlements":[]}"#)
            _ = try c.request(#"{"op":"authorization","user":"alice","app":"\#(app)","status":"authorized","options":["alert"]}"#)
        }
        let before = try c.request(#"{"op":"stats"}"#)["deliveryHead"]?.intValue ?? 0
        let cycle = [(mail, "alice"), (chat, "alice"), (mail, "bob")]
        var sent = 0, acked = 0
        while acked < deliveries {
            while sent < deliveries && sent - acked < 512 {
                let (app, user) = cycle[sent % 3]
                try c.send(#"{"op":"submit","id":"b\#(sent)","app":"\#(app)","user":"\#(user)","title":"Your order shipped","body":"It arrives on Tuesday between 9 and 12.","hiddenPreviewsBodyPlaceholder":"Order update"}"#)
                sent += 1
            }
            _ = try c.readLine(timeoutMilliseconds: 30_000)
            acked += 1
            if acked % 20_000 == 0 { Log.info("consumers: \(acked)/\(deliveries) submits acked") }
        }
        _ = try c.request(#"{"op":"clock","advanceTo":"2026-11-23T06:00:01Z"}"#)
        let head = try c.request(#"{"op":"stats"}"#)["deliveryHead"]?.intValue ?? 0
        c.close()
        guard head - before == Int64(deliveries) else {
            throw StoreError.configuration("expected \(deliveries) deliveries, the head moved by \(head - before)")
        }
        return Int(head)
    }
}
