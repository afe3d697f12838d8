// SPEC §14 "Retention" through a real service: after `herald retain` drops the old log, restart
// resumes from the snapshot, idempotency still holds, a consumer behind the horizon is told
// `cursor_expired` (never skipped), and the archive plus the database export the log byte for
// byte as it was before, which replays without a difference.
import Foundation
import HeraldCore
@testable import HeraldRuntime
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct RetentionServiceTests {
    static func export(_ url: String, archive: URL? = nil) throws -> [String] {
        var lines: [String] = []
        _ = try LogTransfer.export(PGConnection.connect(url), archive: archive.map(ArchiveSegments.init(directory:))) { lines.append($0) }
        return lines
    }

    @Test func retention_afterTheDropRestartConsumersIdempotencyAndReplayHoldFromTheArchive() throws {
        let archive = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("herald-archive-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: archive) }
        var job = RetentionJob(days: 30, archive: archive)
        job.cutMargin = 1
        let count = 20
        // Day 0: twenty notifications, a consumer that acknowledges five of them.
        let first = try TestServer(start: "2026-03-01T09:00:00Z")
        let url = first.url
        do {
            defer { first.stop() }
            let c = try first.client()
            try ServiceTests.setUpAlice(c)
            for i in 0..<count { #expect(try c.call(ServiceTests.submit("n\(i)"))["ok"] == true) }
            _ = try first.statsWhen { ($0["deliveryHead"]?.intValue ?? 0) >= Int64(count) }
            let old = try first.client()
            #expect(try old.call(["op": "subscribe", "consumer": "old", "from": "earliest"])["ok"] == true)
            _ = try old.deliveries(count)
            #expect(try old.call(["op": "ack", "consumer": "old", "partition": 0, "cursor": 5])["ok"] == true)
            // The first run segments the log (the day-0 rows become the first segment); nothing is old enough.
            let conn = try PGConnection.connect(url)
            defer { conn.close() }
            #expect(try job.run(conn).droppedSegments.isEmpty)
            // Forty days later, twenty more.
            #expect(try c.call(["op": "clock", "advanceTo": "2026-04-10T09:00:00Z"])["ok"] == true)
            for i in count..<(2 * count) { #expect(try c.call(ServiceTests.submit("n\(i)"))["ok"] == true) }
            // One deferred past the restart: its timer is in the snapshot at the horizon, its delivery after it.
            #expect(try c.call(ServiceTests.submit("later", extra: ["deliverAt": "2026-04-12T09:00:00Z"]))["ok"] == true)
            _ = try first.statsWhen { ($0["deliveryHead"]?.intValue ?? 0) >= Int64(2 * count) }
        }
        // Stopped: its final snapshot is through the head. The job archives and drops day 0.
        let before = try Self.export(url)
        let conn = try PGConnection.connect(url)
        defer { conn.close() }
        let report = try job.run(conn)
        #expect(report.droppedSegments.count == 2, "the first events and deliveries segments: \(report.droppedSegments)")
        #expect(try conn.execute("SELECT min(seq) FROM events").int64(0, 0) == Int64(count + 3), "setUpAlice's two events and day 0 are gone")
        #expect(throws: StoreError.self, "export refuses a log whose start is archived") { _ = try Self.export(url) }
        #expect(try Self.export(url, archive: archive) == before, "archive + database export the log byte for byte")

        // The archive + database, imported elsewhere, replays without a difference.
        let copy = try TestPostgres.freshDatabase()
        _ = try LogTransfer.import(PGConnection.connect(copy), lines: before)
        #expect(try Replayer().run(PGConnection.connect(copy)) { 0 }.differences.isEmpty)
        // `herald state` and `pending` on the retained database fold from the snapshot: the same
        // state as the whole log's; a point before the snapshot is refused, not answered wrong.
        let retained = try UserHistory.fold(conn, user: "alice", limit: .everything)
        let whole = try UserHistory.fold(PGConnection.connect(copy), user: "alice", limit: .everything)
        #expect(retained.state.json(at: retained.at) == whole.state.json(at: whole.at))
        #expect(retained.at == whole.at)
        #expect(throws: StoreError.self) { _ = try UserHistory.fold(conn, user: "alice", limit: .seq(5)) }

        // Restart on the retained log: from the snapshot, at the horizon.
        let second = try TestServer(url: url, start: "2026-04-10T09:00:00Z")
        var running = true
        defer { if running { second.stop() } }
        let c = try second.client()
        // An archived id stays used: answered as a conflict (the service's duplicate with
        // `duplicate_differs`), naming the archived seq; nothing stored.
        let reused = try c.call(ServiceTests.submit("n0"))
        #expect(reused["duplicate"] == true && reused["seq"]?.intValue == 3, "\(reused.canonicalString)")
        #expect(reused["warnings"]?.arrayValue?.first?["code"] == "duplicate_differs", "\(reused.canonicalString)")
        #expect(try c.call(ServiceTests.submit("n\(2 * count - 1)"))["ok"] == true, "a hot one is a duplicate")
        let fresh = try c.call(ServiceTests.submit("fresh"))
        #expect(fresh["ok"] == true && (fresh["seq"]?.intValue ?? 0) > Int64(2 * count + 2), "\(fresh.canonicalString)")
        // The consumer at cursor 5 is behind the horizon (cursor 20): told so, with where to resume.
        let old = try second.client()
        let expired = try old.call(["op": "subscribe", "consumer": "old"])
        #expect(expired["error"]?["code"] == "cursor_expired")
        #expect(expired["error"]?["earliest"]?.intValue == Int64(count))
        #expect(expired["error"]?["partition"]?.intValue == 0)
        #expect(try old.call(["op": "subscribe", "consumer": "old", "from": 3])["error"]?["code"] == "cursor_expired")
        let resumed = try old.call(["op": "subscribe", "consumer": "old", "from": "earliest"])
        #expect(resumed["cursor"]?.intValue == Int64(count))
        let lines = try old.deliveries(count + 1)
        #expect(lines.compactMap { $0["cursor"]?.intValue } == Array(Int64(count + 1)...Int64(2 * count + 1)), "from the horizon on, none skipped")

        // The deferred one fires; then `herald replay` on the retained database starts from the
        // horizon's snapshot and derives every delivery after it, the timer's included.
        #expect(try c.call(["op": "clock", "advanceTo": "2026-04-13T09:00:00Z"])["ok"] == true)
        _ = try second.statsWhen { ($0["deliveryHead"]?.intValue ?? 0) >= Int64(2 * count + 2) }
        second.stop()
        running = false
        let replayed = try Replayer().run(conn) { 0 }
        #expect(replayed.startedFrom?.snapshot == report.horizons.first?.snapshotId)
        #expect(replayed.differences.isEmpty, "\(replayed.differences)")
        #expect(replayed.deliveriesCompared == 2, "the fresh submit's delivery and the deferred one's")
        #expect(throws: StoreError.self, "a prefix ending before the horizon") {
            var r = Replayer()
            r.limit = .seq(5)
            _ = try r.run(conn) { 0 }
        }
        // The check can fail: a stored delivery after the horizon deleted behind the triggers' back.
        _ = try conn.execute("SET session_replication_role = replica")
        _ = try conn.execute("DELETE FROM deliveries WHERE cursor = (SELECT max(cursor) FROM deliveries)")
        _ = try conn.execute("SET session_replication_role = DEFAULT")
        #expect(try Replayer().run(conn) { 0 }.differences.count == 1)

        // An erasure on the retained partition keeps a snapshot to restart from, even when the
        // service stops before taking the next one (here it takes none).
        let third = try TestServer(url: url, start: "2026-04-13T09:00:00Z") { $0.snapshotAtShutdown = false; $0.snapshotEveryEvents = nil }
        #expect(try third.client().call(["op": "erase", "user": "alice"])["ok"] == true)
        third.stop()
        #expect(try conn.execute("SELECT count(*) FROM snapshots WHERE completed_at IS NOT NULL").int64(0, 0) == 1)
        try TestServer(url: url, start: "2026-04-13T09:00:00Z").stop()

        // Without a snapshot the retained partition cannot be restored: the service refuses to
        // start rather than fold from its first kept event into wrong states.
        _ = try conn.execute("DELETE FROM snapshots")
        let refused = #expect(throws: (any Error).self) { try TestServer(url: url, start: "2026-04-13T09:00:00Z").stop() }
        #expect("\(refused.map { "\($0)" } ?? "")".contains("archived by herald retain"), "\(String(describing: refused))")
    }
}
