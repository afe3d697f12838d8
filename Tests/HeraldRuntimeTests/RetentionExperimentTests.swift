// Issue 45's retention experiments through a real service (the suite's size; scripts/retention-experiments
// runs them with HERALD_RETENTION_EVENTS=1000000): a log over 60 simulated days with 30 kept, and
// retention running under load. Checked against the archive plus the database.
import Foundation
import HeraldCore
@testable import HeraldRuntime
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct RetentionExperimentTests {
    static let mail = ServiceTests.mail
    static let users = (0..<10).map { "user\($0)" }
    static let day: Int64 = 86_400_000
    static let start = Instant(rfc3339: "2026-01-01T09:00:00Z")!
    static var events: Int { Int(ProcessInfo.processInfo.environment["HERALD_RETENTION_EVENTS"] ?? "") ?? 2_400 }

    static func time(day d: Int, plus ms: Int64 = 0) -> String {
        Instant(millisecondsSinceEpoch: start.millisecondsSinceEpoch + Int64(d) * day + ms).rfc3339
    }

    static func submit(_ id: String, user: String, deliverAt: String? = nil) -> String {
        var o: [String: JSONValue] = ["op": "submit", "id": .string(id), "app": .string(mail), "user": .string(user),
                                      "title": .string("Title \(id)"), "body": "Body"]
        if let deliverAt { o["deliverAt"] = .string(deliverAt) }
        return JSONValue.object(o).canonicalString
    }

    static func setUp(_ c: WireClient) throws {
        #expect(try c.call(["op": "registerApp", "app": .string(mail), "entitlements": []])["ok"] == true)
        for u in users + ["idle"] {
            #expect(try c.call(["op": "authorization", "user": .string(u), "app": .string(mail), "status": "authorized",
                                "options": ["alert", "sound", "badge"]])["ok"] == true)
        }
    }

    /// Sends `lines` pipelined, `window` at a time; the replies in order.
    static func pipeline(_ c: WireClient, _ lines: [String], window: Int = 256) throws -> [JSONValue] {
        var replies: [JSONValue] = []
        var i = 0
        while i < lines.count {
            let batch = lines[i..<min(lines.count, i + window)]
            for line in batch { try c.send(line) }
            for _ in batch { replies.append(try c.readJSON(timeoutMilliseconds: 60_000)) }
            i += batch.count
        }
        return replies
    }

    /// Waits until the committed delivery head stops moving.
    static func settled(_ server: TestServer) throws {
        var last: Int64 = -1
        while true {
            let head = try server.statsWhen { _ in true }["deliveryHead"]?.intValue ?? 0
            if head == last { return }
            last = head
            usleep(20_000)
        }
    }

    /// The whole log, archive first, as export lines.
    static func export(_ url: String, archive: URL) throws -> [String] {
        var lines: [String] = []
        _ = try LogTransfer.export(PGConnection.connect(url), archive: ArchiveSegments(directory: archive)) { lines.append($0) }
        return lines
    }

    /// The export imported into a fresh database, replayed: the report.
    static func replayed(_ lines: [String]) throws -> Replayer.Report {
        let copy = try TestPostgres.freshDatabase()
        _ = try LogTransfer.import(PGConnection.connect(copy), lines: lines)
        return try Replayer().run(PGConnection.connect(copy)) { 0 }
    }

    static func archiveDirectory() -> URL {
        URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("herald-archive-\(UUID().uuidString)")
    }

    /// Experiment 2: 60 simulated days, retention of 30 run once a day beside the service. The hot
    /// tables end with the last 30 days only; restart (from the snapshot, with content kept for the
    /// states that refer to it) decides what was pending as the whole log does; the archive plus
    /// the database replays from the start without a difference.
    @Test func retention_sixtyDaysKeepThirtyHotAndArchivePlusDatabaseReplayFromTheStart() throws {
        let archive = Self.archiveDirectory()
        defer { try? FileManager.default.removeItem(at: archive) }
        let perDay = max(Self.events / 60, 40)
        var job = RetentionJob(days: 30, archive: archive)
        job.cutMargin = 16
        let configure: (inout ServiceConfiguration) -> Void = { $0.snapshotEveryEvents = max(perDay / 2, 10); $0.snapshotEventsPerUser = 0 }
        let first = try TestServer(start: Self.time(day: 0), configure: configure)
        let url = first.url
        let conn = try PGConnection.connect(url)
        defer { conn.close() }
        var dropped = 0
        do {
            defer { first.stop() }
            let c = try first.client()
            try Self.setUp(c)
            // A consumer that subscribes on day 0 and never acknowledges.
            let audit = try first.client()
            #expect(try audit.call(["op": "subscribe", "consumer": "audit", "from": "earliest"])["ok"] == true)
            audit.close()
            for d in 0..<60 {
                if d > 0 { #expect(try c.call(["op": "clock", "advanceTo": .string(Self.time(day: d))])["ok"] == true) }
                var lines = (0..<perDay).map { i in
                    Self.submit("d\(d)-\(i)", user: Self.users[i % Self.users.count],
                                deliverAt: i % 10 == 9 ? Self.time(day: d + 1, plus: 3 * 3_600_000) : nil)
                }
                // A user who hears only on day 0: its state keeps referring to those notifications.
                if d == 0 { lines += (0..<3).map { Self.submit("idle-\($0)", user: "idle") } }
                // On day 59 it snoozes one of them: its content is read back after its event was dropped.
                if d == 59 {
                    lines.append(JSONValue.object(["op": "snooze", "user": "idle", "app": .string(Self.mail), "id": "idle-0",
                                                   "until": .string(Self.time(day: 59, plus: 3_600_000))]).canonicalString)
                }
                let replies = try Self.pipeline(c, lines)
                #expect(replies.allSatisfy { $0["ok"] == true }, "day \(d): \(replies.first { $0["ok"] != true }?.canonicalString ?? "")")
                try Self.settled(first)
                if d % 2 == 1 { dropped += try job.run(conn).droppedSegments.count }
            }
            #expect(try c.call(["op": "clock", "advanceTo": .string(Self.time(day: 59, plus: 7_200_000))])["ok"] == true)
            try Self.settled(first)
        }
        #expect(dropped >= 2 * 13, "a segment of each table every other day once 30 days passed: \(dropped)")
        // Hot: the last 30 days (and less than two days more: segments are two days).
        let oldest = try conn.execute("SELECT (extract(epoch FROM min(engine_time)) * 1000)::bigint FROM events").int64(0, 0)!
        #expect(oldest >= Self.start.millisecondsSinceEpoch + 27 * Self.day, "the oldest hot event is from day \((oldest - Self.start.millisecondsSinceEpoch) / Self.day)")
        let hot = try conn.execute("SELECT count(*) FROM events").int64(0, 0)!
        let stored = try EventReader.head(conn)
        #expect(hot <= Int64(33 * (perDay + 1)), "the hot table is bounded: \(hot) of \(stored) events")
        #expect(try conn.execute("SELECT count(*) FROM retained_content").int64(0, 0)! >= 3, "the idle user's notifications are kept")

        // Restart on the retained log; what was pending is decided as before.
        let second = try TestServer(url: url, start: Self.time(day: 59, plus: 7_200_000), configure: configure)
        do {
            defer { second.stop() }
            let c = try second.client()
            #expect(try c.call(JSONValue.parse(Self.submit("after-restart", user: "user0")))["ok"] == true)
            #expect(try c.call(["op": "snooze", "user": "idle", "app": .string(Self.mail), "id": "idle-1",
                                "until": .string(Self.time(day: 60))])["ok"] == true)
            #expect(try c.call(["op": "clock", "advanceTo": .string(Self.time(day: 62))])["ok"] == true)
            try Self.settled(second)
            // The consumer left at cursor 0 on day 0 is behind the horizon: told so.
            let audit = try second.client()
            let expired = try audit.call(["op": "subscribe", "consumer": "audit"])
            #expect(expired["error"]?["code"] == "cursor_expired" && (expired["error"]?["earliest"]?.intValue ?? 0) > 0, "\(expired.canonicalString)")
        }
        // The retained database alone replays from its horizon's snapshot without a difference.
        let fromHorizon = try Replayer().run(conn) { 0 }
        #expect(fromHorizon.startedFrom != nil && fromHorizon.deliveriesCompared > 0 && fromHorizon.differences.isEmpty,
                "\(String(describing: fromHorizon.startedFrom)), \(fromHorizon.deliveriesCompared) compared, \(fromHorizon.differences.prefix(3))")
        // The archive plus the database: the whole log, replayed from the start byte for byte.
        let lines = try Self.export(url, archive: archive)
        // The snoozes of dropped notifications were decided with their content (export opens it).
        for id in ["idle-0", "idle-1"] {
            let last = lines.last { $0.contains(#""delivery":"#) && $0.contains(#""notificationId":"\#(id)""#) } ?? ""
            #expect(last.contains(#"\"snoozed\":true"#) && last.contains("Title \(id)"), "\(last)")
        }
        let report = try Self.replayed(lines)
        #expect(report.differences.isEmpty, "\(report.differences.prefix(3))")
        #expect(Int64(report.eventsRead) == (try EventReader.head(conn)))
        #expect(report.deliveriesCompared == Int((try EventReader.deliveryHead(conn))))
    }

    /// Acknowledged submits the export does not hold at their acknowledged seq with their id.
    /// The ids of every "Title load-N" in `text`, in clear or hex-encoded (pg_dump's bytea): one pass each.
    static func titledIds(in text: String) -> Set<String> {
        var ids = Set<String>()
        for piece in text.components(separatedBy: "Title load-").dropFirst() {
            ids.insert("load-" + piece.prefix { $0.isASCII && $0.isNumber })
        }
        for piece in text.components(separatedBy: ErasureTests.hex("Title load-")).dropFirst() {
            var digits = ""
            var rest = Substring(piece)
            while rest.count >= 2, rest.hasPrefix("3"), let d = rest.dropFirst().first, d.isNumber {
                digits.append(d)
                rest = rest.dropFirst(2)
            }
            ids.insert("load-" + digits)
        }
        return ids
    }

    static func lostAcknowledged(_ acked: [(id: String, seq: Int64)], export lines: [String]) throws -> [String] {
        var stored: [Int64: String] = [:]
        for line in lines {
            let v = try JSONValue.parse(line)
            if let e = v["event"], let seq = e["seq"]?.intValue { stored[seq] = e["notificationId"]?.stringValue }
        }
        return acked.filter { stored[$0.seq] != $0.id }.map { "\($0.id) acknowledged at seq \($0.seq), stored: \(stored[$0.seq] ?? "nothing")" }
    }

    /// Experiment 3: retention runs while a producer submits and a consumer streams, and a user is
    /// erased half-way (after some of their notifications were archived). Every
    /// acknowledged submit is in the archive or the database at its seq; the live consumer sees
    /// every cursor once, in order; a consumer left behind the horizon gets `cursor_expired` and
    /// resumes at the horizon with nothing skipped after it. The checker is shown to catch a
    /// planted phantom acknowledgement. The erased user's earlier content is unreadable in the
    /// export (archived lines included) and in `pg_dump`; the service restarts on the retained log
    /// after the erasure and delivers the user's next notification.
    @Test func retention_underLoadLosesNoAcknowledgedSubmitAndSkipsNoConsumer() throws {
        let archive = Self.archiveDirectory()
        defer { try? FileManager.default.removeItem(at: archive) }
        let perDay = max(Self.events / 40, 40)
        var job = RetentionJob(days: 5, archive: archive)
        job.cutMargin = Int64(4 * perDay)
        let server = try TestServer(start: Self.time(day: 0)) { $0.snapshotEveryEvents = perDay; $0.snapshotEventsPerUser = 0; $0.deliveryRingCapacity = 64 }
        let url = server.url
        let conn = try PGConnection.connect(url)
        defer { conn.close() }
        let c = try server.client()
        try Self.setUp(c)
        let slow = try server.client()
        #expect(try slow.call(["op": "subscribe", "consumer": "slow", "from": "earliest"])["ok"] == true)
        slow.close()

        final class Shared: @unchecked Sendable {
            let lock = NSLock()
            var stop = false
            var acked: [(id: String, seq: Int64)] = []
            var failures: [String] = []
            var cursors: [Int64] = []
            /// Set once the producer stopped: the consumer reads until it has seen it.
            var finalHead: Int64?
        }
        let shared = Shared()
        let producer = try server.client()
        let produced = DispatchSemaphore(value: 0)
        Thread {
            var n = 0
            while !shared.lock.withLock({ shared.stop }) {
                let id = "load-\(n)"
                do {
                    let r = try producer.request(Self.submit(id, user: Self.users[n % Self.users.count]))
                    shared.lock.withLock {
                        if r["ok"] == true, let seq = r["seq"]?.intValue { shared.acked.append((id, seq)) } else { shared.failures.append(r.canonicalString) }
                    }
                } catch { shared.lock.withLock { shared.failures.append("\(error)") }; break }
                n += 1
            }
            produced.signal()
        }.start()
        let live = try server.client()
        #expect(try live.call(["op": "subscribe", "consumer": "live", "from": "earliest"])["ok"] == true)
        let consumed = DispatchSemaphore(value: 0)
        Thread {
            var since = 0
            var idle = 0
            while true {
                guard let v = try? live.readJSON(timeoutMilliseconds: 1_000) else {
                    let (done, last) = shared.lock.withLock { (shared.finalHead, shared.cursors.last ?? 0) }
                    if let done { idle += 1; if last >= done || idle > 30 { break } }
                    continue
                }
                guard v["op"]?.stringValue == "delivery", let cursor = v["cursor"]?.intValue else {
                    if v["ok"] == false { shared.lock.withLock { shared.failures.append("live: \(v.canonicalString)") } }
                    continue
                }
                shared.lock.withLock { shared.cursors.append(cursor) }
                since += 1
                if since >= 50 { try? live.send(#"{"op":"ack","consumer":"live","partition":0,"cursor":\#(cursor)}"#); since = 0 }
            }
            consumed.signal()
        }.start()

        var dropped = 0
        var erasedAt: Int64 = 0
        for d in 1...20 {
            #expect(try c.call(["op": "clock", "advanceTo": .string(Self.time(day: d))])["ok"] == true)
            if d == 10 {
                let erased = try c.call(["op": "erase", "user": "user3"])
                #expect(erased["ok"] == true, "\(erased.canonicalString)")
                erasedAt = erased["seq"]?.intValue ?? 0
            }
            let target = shared.lock.withLock { shared.acked.count } + perDay
            while shared.lock.withLock({ shared.acked.count < target && shared.failures.isEmpty }) { usleep(2_000) }
            dropped += try job.run(conn).droppedSegments.count
        }
        shared.lock.withLock { shared.stop = true }
        produced.wait()
        try Self.settled(server)
        let head = try server.statsWhen { _ in true }["deliveryHead"]?.intValue ?? 0
        shared.lock.withLock { shared.finalHead = head }
        _ = consumed.wait(timeout: .now() + 60)
        #expect(shared.failures.isEmpty, "\(shared.failures.prefix(3))")
        #expect(dropped >= 2, "segments were dropped under load: \(dropped)")
        let cursors = shared.lock.withLock { shared.cursors }
        let firstOff = zip(cursors, 1...).first { $0.0 != Int64($0.1) }
        #expect(cursors == Array(1...max(1, head)), "the live consumer saw every cursor once, in order (\(cursors.count) of \(head); first off: \(String(describing: firstOff)), last \(cursors.suffix(3)))")

        // The consumer left at cursor 0: cursor_expired, then from the horizon on, none skipped.
        let horizon = try conn.execute("SELECT cursor FROM retention_horizons WHERE partition = 0").int64(0, 0) ?? 0
        #expect(horizon > 0)
        let late = try server.client()
        let expired = try late.call(["op": "subscribe", "consumer": "slow"])
        #expect(expired["error"]?["code"] == "cursor_expired" && expired["error"]?["earliest"]?.intValue == horizon, "\(expired.canonicalString)")
        #expect(try late.call(["op": "subscribe", "consumer": "slow", "from": "earliest"])["cursor"]?.intValue == horizon)
        let resumed = try late.deliveries(Int(head - horizon))
        #expect(resumed.compactMap { $0["cursor"]?.intValue } == Array((horizon + 1)...head))
        server.stop()

        let lines = try Self.export(url, archive: archive)
        let acked = shared.lock.withLock { shared.acked }
        #expect(try Self.lostAcknowledged(acked, export: lines).isEmpty)
        // Planted fault: an acknowledgement the log never stored is reported.
        let phantom = try Self.lostAcknowledged(acked + [(id: "phantom", seq: acked[acked.count / 2].seq)], export: lines)
        #expect(phantom.count == 1 && phantom[0].hasPrefix("phantom"), "\(phantom)")
        let report = try Self.replayed(lines)
        #expect(report.differences.isEmpty, "\(report.differences.prefix(3))")

        // The erasure reached the archive too: user3's content before it is erased in the export
        // (archived lines included), anyone else's is readable; pg_dump holds none of it.
        #expect(erasedAt > 0 && dropped > 0)
        let erasedIds = acked.enumerated().filter { $0.offset % Self.users.count == 3 && $0.element.seq < erasedAt }.map(\.element.id)
        var erasedLines = 0, readable = 0
        for line in lines {
            guard let e = try JSONValue.parse(line)["event"], e["type"] == "submit", let seq = e["seq"]?.intValue, seq < erasedAt,
                  let body = e["body"]?.stringValue else { continue }
            if e["user"] == "user3" { erasedLines += 1; #expect(!body.contains("Title"), "\(body)") } else if body.contains("Title") { readable += 1 }
        }
        #expect(erasedLines >= erasedIds.count && readable > erasedLines, "\(erasedLines) erased, \(readable) readable")
        let dump = try ErasureTests.pgDump(url)
        #expect(Self.titledIds(in: "a Title load-12\" b \\x\(ErasureTests.hex("Title load-7\""))") == ["load-12", "load-7"], "the search finds both forms")
        let inDump = Set(erasedIds).intersection(Self.titledIds(in: dump))
        #expect(inDump.isEmpty, "erased content in pg_dump: \(inDump.prefix(3))")

        // Restart on the retained log after the erasure: from its snapshot; user3's next notification is delivered.
        let again = try TestServer(url: url, start: Self.time(day: 20))
        defer { again.stop() }
        let r = try again.client().call(try JSONValue.parse(Self.submit("after-erasure", user: "user3")))
        #expect(r["ok"] == true && r["duplicate"] == nil, "\(r.canonicalString)")
        _ = try again.statsWhen { ($0["deliveryHead"]?.intValue ?? 0) > head }
        let stored = try conn.execute("SELECT kind FROM deliveries WHERE user_id = 'user3' AND notification_id = 'after-erasure'")
        #expect(stored.rowCount == 1, "delivered")
    }
}
