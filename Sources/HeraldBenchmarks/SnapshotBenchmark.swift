// Snapshot capture micro-benchmark: encoding every user's state, beside decoding it and copying its bytes.
import Foundation
import HeraldCore

/// What a periodic snapshot costs the loop per user (`HeraldService.captureSlice` encodes every
/// user, every `snapshotEveryEvents` events: the interval is events, the cost is users), with
/// its baselines in the same run: reading the records back (`UserState(snapshot:)`, what a
/// restart does) and a plain copy of the encoded bytes (the floor of writing them at all).
/// Arguments: `--users N` (default 200000), `--repeat N` (default 3: the median is printed).
public func runSnapshotBenchmark(arguments: [String]) {
    func arg(_ name: String, _ def: Int) -> Int {
        if let i = arguments.firstIndex(of: name), i + 1 < arguments.count, let v = Int(arguments[i + 1]) { return v }
        return def
    }
    let users = arg("--users", 200_000)
    let repeats = max(1, arg("--repeat", 3))
    let engine = Engine()
    var apps = AppRegistry()
    let appNames = ["com.example.mail", "com.example.chat"]
    let start = Instant(rfc3339: "2026-01-05T12:00:00Z")!
    var seq: Int64 = 0
    func apply(_ state: inout UserState, _ type: String, _ body: [String: JSONValue], at: Instant) {
        seq += 1
        var b = body
        b["user"] = .string(state.user)
        _ = engine.apply(StoredEvent(seq: seq, user: state.user, type: type, body: .object(b), at: at), to: &state, apps: &apps)
    }

    // States as a running service holds them: two authorized apps, a few delivered notifications
    // (recent lists, snoozable content), one deferred in every fourth user, a summary schedule
    // in every tenth. Ids over 15 bytes, as real ones are (heap-allocated strings).
    print("snapshot.build     \(users) users …")
    var states: [UserState] = (0..<users).map { UserState(user: "user-\($0)-account") }
    for i in states.indices {
        for a in appNames {
            apply(&states[i], "authorization", ["app": .string(a), "status": "authorized", "options": ["alert", "sound", "badge"]], at: start)
        }
        if i % 10 == 0 { apply(&states[i], "summarySchedule", ["times": ["08:00", "18:00"], "timeZone": "Europe/Berlin"], at: start) }
        for k in 0..<3 {
            var o: [String: JSONValue] = ["id": .string("n-\(i)-\(k)-order-update"), "app": .string(appNames[k % 2]),
                                          "title": "Order shipped", "body": "Your order has shipped", "threadId": "orders"]
            if k == 2 && i % 4 == 0 { o["deliverAt"] = .string(start.adding(.days(2)).rfc3339) }
            apply(&states[i], "submit", o, at: start.adding(.init(milliseconds: Int64(k))))
        }
    }

    func median(_ xs: [Double]) -> Double { xs.sorted()[xs.count / 2] }
    var encodeCPU: [Double] = [], decodeCPU: [Double] = [], copyCPU: [Double] = []
    var encoded: [UInt8] = []
    for _ in 0..<repeats {
        // Encode: as a capture does, records read in place, one scratch writer reused.
        var part = SnapshotWriter(capacity: 4 << 20)
        var scratch = SnapshotWriter(capacity: 512)
        var parts: [[UInt8]] = []
        encodeCPU.append(measure {
            states.withUnsafeBufferPointer { records in
                for i in records.indices {
                    UserState.encodeSnapshotRecord(at: records.baseAddress! + i, deliveryCount: 3, to: &part, scratch: &scratch)
                    if part.bytes.count >= 4 << 20 { parts.append(part.bytes); part = SnapshotWriter(capacity: 4 << 20) }
                }
            }
            parts.append(part.bytes)
        }.cpu)
        encoded = parts.flatMap { $0 }
        // Decode: the records back, as restore reads them (content references left unresolved).
        var decoded = 0
        decodeCPU.append(measure {
            encoded.withUnsafeBytes { raw in
                var r = SnapshotReader(raw)
                do throws(SnapshotFormatError) {
                    while !r.isAtEnd {   // as restore reads a part: length, delivery ordinal, state
                        let length = try r.count()
                        let end = r.position + length
                        _ = try r.int()
                        _ = try UserState(snapshot: &r)
                        guard r.position == end else { throw SnapshotFormatError("record \(decoded) is not \(length) bytes") }
                        decoded += 1
                    }
                } catch {
                    fatalError("snapshot.decode: \(error)")
                }
            }
        }.cpu)
        precondition(decoded == users, "decoded \(decoded) of \(users) records")
        // Copy: the same bytes moved once (the floor of writing them).
        var copy = [UInt8](repeating: 0, count: encoded.count)
        copyCPU.append(measure {
            copy.withUnsafeMutableBytes { dst in encoded.withUnsafeBytes { src in dst.copyMemory(from: src) } }
        }.cpu)
        withExtendedLifetime(copy) {}
    }
    func perUser(_ s: Double) -> String { String(format: "%.3f µs/user", s / Double(users) * 1e6) }
    let bytes = encoded.count
    print("snapshot.encode    \(perUser(median(encodeCPU)))   (\(users) users, \(bytes / users) bytes each, CPU of one core, median of \(repeats))")
    print("snapshot.decode    \(perUser(median(decodeCPU)))   baseline: the records read back, as a restart reads them")
    print("snapshot.copy      \(perUser(median(copyCPU)))   baseline: the encoded bytes copied once")
    print(String(format: "snapshot.perEvent  %.2f µs of loop CPU per event at the default interval (every 250,000 events, %d users)",
                 median(encodeCPU) / 250_000 * 1e6, users))
}
