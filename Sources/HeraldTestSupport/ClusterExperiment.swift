// Issue 41's experiments: producers sending to any member of a cluster while members crash or pause, and a checker of what the database holds.
import Foundation
import Glibc
import HeraldCore
import HeraldStore
import HeraldWireTesting
import Synchronization

/// Producers that send submits to any member of a cluster (SPEC §9: any instance accepts any
/// request), each keeping `window` outstanding. A producer whose connection ends (its member was
/// killed, paused past the read timeout, or said goodbye) re-sends everything it has no reply
/// for, with the same ids, to the next member; a refusal that says nothing was stored
/// (`store_unavailable`, `partition_unavailable`, `not_owner`) is re-sent after a pause.
public struct ClusterLoad: Sendable {
    public var producers = 6
    public var events = 6_000
    public var window = 64
    public var users = 300
    public var app = "com.example.cluster"
    /// Prefix of the submits' ids (several loads on one database use several).
    public var idPrefix = "c"
    /// Every `deferEvery`-th submit is deferred by `deferSeconds` of engine time (a timer).
    public var deferEvery = 10
    public var deferSeconds = 3_600
    public var start = Instant(rfc3339: "2026-03-27T07:00:00Z")!
    public var timeoutSeconds: Double = 600
    /// How long a reply may take before the connection is given up (a paused member).
    public var replyTimeoutMilliseconds: Int32 = 4_000
    /// Submits per second over all producers (0: as fast as replies come): paced, the load spans
    /// the crashes it is meant to meet.
    public var ratePerSecond = 0

    public init() {}

    public struct Ack: Sendable, Equatable {
        public var partition: Int64, seq: Int64, duplicate: Bool
    }

    public struct Stats: Sendable, CustomStringConvertible {
        public var sent = 0, resent = 0, acked = 0, duplicates = 0, refusedRetried = 0, reconnects = 0, goodbyes = 0
        public var description: String {
            "sent \(sent) (\(resent) re-sent), acked \(acked) (\(duplicates) as duplicate), refused and re-sent \(refusedRetried), reconnects \(reconnects), goodbyes \(goodbyes)"
        }
    }

    public func user(_ i: Int) -> String { "user-\(i % users)" }
    public func id(_ i: Int) -> String { "\(idPrefix)-\(i)" }
    public func isDeferred(_ i: Int) -> Bool { deferEvery > 0 && i % deferEvery == 0 }

    public func line(_ i: Int) -> String {
        var o: [String: JSONValue] = ["rid": .int(Int64(i)), "op": "submit", "app": .string(app), "id": .string(id(i)),
                                      "user": .string(user(i)), "title": .string("Order #\(i)")]
        if isDeferred(i) { o["deliverAt"] = .string(start.adding(.init(milliseconds: Int64(deferSeconds) * 1000)).rfc3339) }
        return JSONValue.object(o).canonicalString
    }

    /// Registers the app and authorizes every user through `port` (retried: idempotent in effect).
    public func prepare(ports: [Int]) throws {
        var lines = [#"{"op":"registerApp","app":"\#(app)","entitlements":[]}"#]
        for u in 0..<users {
            lines.append(#"{"op":"authorization","user":"user-\#(u)","app":"\#(app)","status":"authorized","options":["alert","sound","badge"]}"#)
        }
        for line in lines {
            var done = false
            for attempt in 0..<200 where !done {
                if let c = try? WireClient(port: ports[attempt % ports.count]), (try? c.request(#"{"op":"hello"}"#))?["ok"] == true,
                   let r = try? c.request(line, timeoutMilliseconds: 10_000), r["ok"] == true {
                    done = true
                } else {
                    usleep(50_000)
                }
            }
            if !done { throw ExperimentError("could not prepare: \(line)") }
        }
    }

    /// Runs every producer until each submit is acknowledged; returns the acks by index.
    public func run(ports: [Int]) throws -> (acks: [Int: Ack], stats: Stats) {
        let total = Mutex(Stats())
        let acks = Mutex([Int: Ack]())
        let failure = Mutex<String?>(nil)
        let deadline = Date().addingTimeInterval(timeoutSeconds)
        // A thread per producer (not concurrentPerform, which runs as many at once as there are cores).
        let finished = DispatchSemaphore(value: 0)
        for p in 0..<producers {
            Thread.detachNewThread {
                do {
                    let s = try produce(p, ports: ports, deadline: deadline) { i, ack in acks.withLock { $0[i] = ack } }
                    total.withLock { t in
                        t.sent += s.sent; t.resent += s.resent; t.acked += s.acked; t.duplicates += s.duplicates
                        t.refusedRetried += s.refusedRetried; t.reconnects += s.reconnects; t.goodbyes += s.goodbyes
                    }
                } catch {
                    failure.withLock { $0 = $0 ?? "producer \(p): \(error)" }
                }
                finished.signal()
            }
        }
        for _ in 0..<producers { finished.wait() }
        if let f = failure.withLock({ $0 }) { throw ExperimentError(f) }
        return (acks.withLock { $0 }, total.withLock { $0 })
    }

    private func produce(_ p: Int, ports: [Int], deadline: Date, record: (Int, Ack) -> Void) throws -> Stats {
        var stats = Stats()
        // What this producer saw last (connections, their ends, refusals): told with a failure.
        var seen: [String] = []
        func saw(_ what: String) {
            if seen.count == 30 { seen.removeFirst() }
            seen.append("\(String(format: "%.3f", Date().timeIntervalSince1970)) \(what)")
        }
        func lastSeen() -> String { "; producer \(p) saw last:\n  " + seen.joined(separator: "\n  ") }
        var queue: [Int] = Array(stride(from: p, to: events, by: producers)).reversed()
        var everSent = Set<Int>()
        var attempt = p
        var connectedOnce = false
        let began = Date()
        var paced = 0
        let perProducer = Double(ratePerSecond) / Double(producers)
        while !queue.isEmpty {
            guard Date() < deadline else {
                throw ExperimentError("\(queue.count) submits still unacknowledged at the deadline (next: \(queue.suffix(3).reversed()))" + lastSeen())
            }
            attempt += 1
            let client: WireClient
            do {
                client = try WireClient(port: ports[attempt % ports.count])
                guard try client.request(#"{"op":"hello"}"#, timeoutMilliseconds: 2_000)["ok"] == true else { continue }
                saw("connected to port \(ports[attempt % ports.count]), \(queue.count) to send")
            } catch {
                saw("could not connect to port \(ports[attempt % ports.count]): \(error)")
                usleep(50_000)
                continue
            }
            if connectedOnce { stats.reconnects += 1 }
            connectedOnce = true
            var outstanding: [Int] = []
            var head = 0
            var goodbye = false
            var pauseUntil = Date.distantPast
            do {
                while head < outstanding.count || (!queue.isEmpty && !goodbye) {
                    if !goodbye && Date() >= pauseUntil {
                        var chunk = ""
                        while !queue.isEmpty && outstanding.count - head < window {
                            if perProducer > 0 && Double(paced) > Date().timeIntervalSince(began) * perProducer { break }
                            paced += 1
                            let i = queue.removeLast()
                            if everSent.insert(i).inserted { stats.sent += 1 } else { stats.resent += 1 }
                            outstanding.append(i)
                            chunk += line(i) + "\n"
                        }
                        if !chunk.isEmpty { try client.sendRaw(Array(chunk.utf8)) }
                    }
                    guard head < outstanding.count else { usleep(5_000); continue }
                    let reply = try client.readJSON(timeoutMilliseconds: replyTimeoutMilliseconds)
                    if reply["op"] == "goodbye" { goodbye = true; stats.goodbyes += 1; continue }
                    let i = outstanding[head]
                    head += 1
                    guard reply["rid"]?.intValue == Int64(i) else { throw ExperimentError("reply out of order: expected rid \(i), got \(reply.canonicalString)") }
                    if reply["ok"] == true {
                        let ack = Ack(partition: reply["partition"]?.intValue ?? -1, seq: reply["seq"]?.intValue ?? 0, duplicate: reply["duplicate"] == true)
                        stats.acked += 1
                        if ack.duplicate { stats.duplicates += 1 }
                        record(i, ack)
                    } else if let code = reply["error"]?["code"]?.stringValue, ["store_unavailable", "partition_unavailable", "not_owner"].contains(code) {
                        stats.refusedRetried += 1
                        saw("submit \(i) refused: \(code)")
                        queue.append(i)
                        pauseUntil = Date().addingTimeInterval(0.1)
                    } else {
                        throw ExperimentError("submit \(i) refused: \(reply.canonicalString)" + lastSeen())
                    }
                }
            } catch let e as ExperimentError {
                throw e
            } catch {
                // The member was killed, paused, or closed after its goodbye: re-send what has no reply.
                saw("connection ended (\(error)) with \(outstanding.count - head) unanswered from submit \(head < outstanding.count ? outstanding[head] : -1)\(goodbye ? " after goodbye" : "")")
            }
            queue.append(contentsOf: outstanding[head...].reversed())
            client.close()
        }
        return stats
    }
}

/// What a cluster's database holds after an experiment, checked against what producers were told.
public struct ClusterChecker {
    public struct Report: CustomStringConvertible {
        public var findings: [String] = []
        public var submitsStored = 0, decisions = 0, timersFired = 0, partitionsChecked = 0
        public var ok: Bool { findings.isEmpty }
        public var description: String {
            (ok ? "PASS" : "FAIL") + ": \(submitsStored) submits stored, \(decisions) decisions, \(timersFired) timers fired, "
                + "\(partitionsChecked) partitions gap-free" + (ok ? "" : "; \(findings.count) finding(s):\n  " + findings.prefix(12).joined(separator: "\n  "))
        }
    }

    /// Every acked submit is stored exactly once at the acked (partition, seq); each partition's
    /// seqs and cursors run 1…n without a hole; every submit got exactly one decision, and every
    /// deferred one exactly one delivery at its instant once the clock passed it.
    public static func check(url: String, load: ClusterLoad, acks: [Int: ClusterLoad.Ack], timersDue: Bool) throws -> Report {
        var report = Report()
        let conn = try PGConnection.connect(url)
        defer { conn.close() }
        let partitions = Int(try conn.execute("SELECT partitions FROM partitioning").int64(0, 0) ?? 1)
        let events = try conn.execute("""
            SELECT partition, seq, user_id, notification_id FROM events WHERE type = 'submit' AND app = $1
            """, [load.app])
        var stored: [String: [(Int64, Int64)]] = [:]
        for r in 0..<events.rowCount {
            stored["\(events.string(r, 2) ?? "")/\(events.string(r, 3) ?? "")", default: []].append((events.int64(r, 0) ?? -1, events.int64(r, 1) ?? -1))
        }
        report.submitsStored = events.rowCount
        for i in 0..<load.events {
            let key = "\(load.user(i))/\(load.id(i))"
            let rows = stored[key] ?? []
            guard let ack = acks[i] else { report.findings.append("NOT ACKED \(key)"); continue }
            if rows.isEmpty { report.findings.append("LOST \(key): acknowledged at partition \(ack.partition) seq \(ack.seq) but not stored") }
            if rows.count > 1 { report.findings.append("DUPLICATED \(key): stored \(rows.count) times at \(rows)") }
            // seq 0: the reply carried no position (the ack-before-commit control).
            if let row = rows.first, ack.seq > 0, row != (ack.partition, ack.seq) {
                report.findings.append("MISPLACED \(key): acknowledged at \(ack.partition)/\(ack.seq), stored at \(row.0)/\(row.1)")
            }
            if let row = rows.first, row.0 != Int64(Partitioning(count: partitions).partition(of: load.user(i))) {
                report.findings.append("WRONG PARTITION \(key): stored in partition \(row.0)")
            }
        }
        for (table, column) in [("events", "seq"), ("deliveries", "cursor")] {
            let gaps = try conn.execute("""
                SELECT partition, count(*), coalesce(min(\(column)), 0), coalesce(max(\(column)), 0) FROM \(table) GROUP BY partition ORDER BY partition
                """)
            for r in 0..<gaps.rowCount where gaps.int64(r, 1) != gaps.int64(r, 3) || (gaps.int64(r, 1) ?? 0) > 0 && gaps.int64(r, 2) != 1 {
                report.findings.append("HOLES in \(table) of partition \(gaps.int64(r, 0) ?? -1): \(gaps.int64(r, 1) ?? 0) rows, \(column)s \(gaps.int64(r, 2) ?? 0)…\(gaps.int64(r, 3) ?? 0)")
            }
        }
        report.partitionsChecked = partitions
        // One decision per notification (alert, quiet, queued… for the submit itself), and one
        // delivery at the deferred instant for each deferred submit.
        let decisions = try conn.execute("""
            SELECT user_id, notification_id, count(*) FILTER (WHERE kind <> 'withdrawn'),
                   count(*) FILTER (WHERE kind IN ('alert', 'quiet') AND at = $2::timestamptz)
            FROM deliveries WHERE app = $1 GROUP BY user_id, notification_id
            """, [load.app, load.start.adding(.init(milliseconds: Int64(load.deferSeconds) * 1000)).rfc3339])
        var decided: [String: (Int64, Int64)] = [:]
        for r in 0..<decisions.rowCount { decided["\(decisions.string(r, 0) ?? "")/\(decisions.string(r, 1) ?? "")"] = (decisions.int64(r, 2) ?? 0, decisions.int64(r, 3) ?? 0) }
        for i in 0..<load.events {
            let key = "\(load.user(i))/\(load.id(i))"
            let (n, atDue) = decided[key] ?? (0, 0)
            if load.isDeferred(i) {
                // Deferred: held until its instant (one decision), then delivered once when the clock passes it.
                if timersDue && atDue != 1 { report.findings.append("TIMER \(key): \(atDue) deliveries at its instant") }
                if timersDue { report.timersFired += Int(atDue) }
            } else if n != 1 {
                report.findings.append("DECISIONS \(key): \(n)")
            }
            report.decisions += n > 0 ? 1 : 0
        }
        return report
    }
}
