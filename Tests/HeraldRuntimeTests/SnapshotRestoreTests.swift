// Snapshots against real PostgreSQL: snapshot + tail restores exactly the state (and the later deliveries) the whole log folds to.
import Foundation
@testable import HeraldCore
@testable import HeraldRuntime
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct SnapshotRestoreTests {
    static let start = "2026-11-23T06:00:00Z"

    /// Requests touching every part of a user's state: summary schedule, scheduled Focus,
    /// attention budget, deferred with collapse, snooze, mute, opened, badge clear, early withdraw.
    static func richUser(_ u: Int, phase: Int) -> [(op: String, body: JSONValue)] {
        let user = JSONValue.string("rich-\(u)")
        let app = JSONValue.string(SyntheticWorkloads.app)
        func submit(_ id: String, _ extra: [String: JSONValue] = [:]) -> (op: String, body: JSONValue) {
            var o: [String: JSONValue] = ["user": user, "app": app, "id": .string("r\(u)-\(phase)-\(id)"), "title": "Hello",
                                          "body": "A body", "hiddenPreviewsBodyPlaceholder": "Update"]
            for (k, v) in extra { o[k] = v }
            return ("submit", .object(o))
        }
        if phase == 0 {
            return [
                ("authorization", .object(["user": user, "app": app, "status": "authorized", "options": ["alert", "sound", "badge"]])),
                ("summarySchedule", .object(["user": user, "times": ["08:00", "18:00"], "timeZone": "Europe/Berlin"])),
                ("focusDefine", .object(["user": user, "focus": "Sleep", "allowedPeople": ["ana"], "allowedApps": [],
                                         "allowTimeSensitive": true, "timeZone": "Europe/Berlin",
                                         "schedule": [["days": [1, 2, 3, 4, 5, 6, 7], "start": "22:00", "end": "07:30"]]])),
                ("settings", .object(["user": user, "attentionBudget": 5])),
                ("withdraw", .object(["user": user, "app": app, "id": .string("r\(u)-0-early")])),
                submit("a"),
                submit("b", ["interruptionLevel": "timeSensitive"]),
                submit("c", ["deliverAt": "2026-11-23T09:00:00Z", "collapseId": "score"]),
                submit("d", ["deliverAt": "2026-11-23T09:30:00Z", "collapseId": "score", "expiresAt": "2026-11-24T00:00:00Z"]),
                submit("e", ["deliverAt": "2026-11-25T10:00:00Z", "relevanceScore": 0.4]),
                submit("early"),
            ]
        }
        return [
            ("snooze", .object(["user": user, "app": app, "id": .string("r\(u)-0-a"), "until": "2026-11-23T12:00:00Z"])),
            ("opened", .object(["user": user, "app": app, "id": .string("r\(u)-0-b")])),
            ("settings", .object(["user": user, "app": app, "delivery": "summary"])),
            submit("f", ["relevanceScore": 0.9]),
            submit("g", ["deliverAt": "2026-11-23T07:45:00Z"]),
            ("mute", .object(["user": user, "app": app, "until": "2026-11-23T07:10:00Z"])),
            submit("h", ["deliverAt": "2026-11-26T10:00:00Z"]),
            ("focusOn", .object(["user": user, "focus": "Sleep", "until": "2026-11-23T11:00:00Z"])),
            submit("i", ["interruptionLevel": "passive"]),
            ("badgeClear", .object(["user": user, "app": app])),
        ]
    }

    static func send(_ c: WireClient, _ requests: [(op: String, body: JSONValue)]) throws {
        for (op, body) in requests {
            let r = try c.call(.object(body.objectValue!.merging(["op": .string(op)]) { a, _ in a }))
            #expect(r["ok"] == true, "\(op): \(r.canonicalString)")
        }
    }

    /// Phase 0 (and the synthetic workloads) for `users` users of each kind.
    static func phase(_ p: Int, users: Int) -> [(op: String, body: JSONValue)] {
        var out: [(op: String, body: JSONValue)] = []
        if p == 0 { out.append(SyntheticWorkloads.registerApp()) }
        for u in 0..<users {
            out += richUser(u, phase: p)
            if p == 0 {
                out += SyntheticWorkloads.stormUser(100 + u, items: 2)
                out += SyntheticWorkloads.timersUser(200 + u, timers: 5, from: Instant(rfc3339: start)!)
            } else {
                out += SyntheticWorkloads.mixedUser(300 + u, eventsPerUser: 8)
            }
        }
        return out
    }

    /// Waits (polling the table, no timing asserted) until a snapshot newer than `after` is complete; returns its id.
    @discardableResult
    static func waitForSnapshot(_ url: String, after: Int64 = 0) throws -> Int64 {
        let conn = try PGConnection.connect(url)
        defer { conn.close() }
        for _ in 0..<6_000 {
            if let id = try conn.execute("SELECT max(id) FROM snapshots WHERE completed_at IS NOT NULL").int64(0, 0), id > after { return id }
            usleep(10_000)
        }
        Issue.record("no snapshot completed")
        return 0
    }

    /// A service that restored `url` (without listening), with or without snapshots.
    static func restored(_ url: String, snapshots: Bool, log: LogLines? = nil) throws -> HeraldService {
        var config = ServiceConfiguration(databaseURL: url)
        config.clock = .manual(start: Instant(rfc3339: start)!)
        config.handleSignals = false
        config.restoreFromSnapshots = snapshots
        config.snapshotEveryEvents = nil
        let service = HeraldService(configuration: config) { log?.append($0) }
        let conn = try PGConnection.connect(url)
        defer { conn.close() }
        try service.restore(from: conn)
        return service
    }

    /// The two restored services hold the same users, states, ordinals and wake-ups, and
    /// (content loaded) decide the same deliveries, byte for byte, when time moves on. States are
    /// compared at the same engine time: a snapshot captured after timers fired (a clock move
    /// with no event after it) is ahead of the log's fold until start-up fires what is due by
    /// now, which both do first here (as `start()` does).
    static func expectSame(_ a: HeraldService, _ b: HeraldService, advanceTo: String) throws {
        let ids = a.users.map(\.state.user)
        #expect(Set(ids) == Set(b.users.map(\.state.user)))
        #expect(a.userOrdinals.count == ids.count && b.userOrdinals.count == ids.count)
        #expect(a.apps == b.apps)
        #expect(a.lastFoldedSeq == b.lastFoldedSeq)
        let now = a.now()
        #expect(now == b.now())
        for u in ids.sorted() {
            guard let oa = a.ordinal(of: u), let ob = b.ordinal(of: u) else { Issue.record("no ordinal for \(u)"); continue }
            try a.loadContent(due: [(oa, now)])
            try b.loadContent(due: [(ob, now)])
            let firedA = a.engine.advance(&a.users[oa].state, to: now, apps: a.apps).deliveries
            let firedB = b.engine.advance(&b.users[ob].state, to: now, apps: b.apps).deliveries
            // Decided before the snapshot (B) or re-derived now (A): the same ordinal either way.
            #expect(a.users[oa].deliveryCount + Int64(firedA.count) == b.users[ob].deliveryCount + Int64(firedB.count), "delivery ordinal of \(u)")
            let ra = a.users[oa], rb = b.users[ob]
            #expect(ra.state == rb.state, "state of \(u)")
            #expect(ra.state.json == rb.state.json, "state view of \(u)")
            #expect(ra.state.nextDeadline() == rb.state.nextDeadline(), "wake of \(u)")
        }
        let later = Instant(rfc3339: advanceTo)!
        var firedA: [String] = [], firedB: [String] = []
        for u in ids.sorted() {
            guard let oa = a.ordinal(of: u), let ob = b.ordinal(of: u) else { Issue.record("no ordinal for \(u)"); continue }
            try a.loadContent(due: [(oa, later)])
            try b.loadContent(due: [(ob, later)])
            firedA += a.engine.advance(&a.users[oa].state, to: later, apps: a.apps).deliveries.map { String(decoding: $0.bodyBytes, as: UTF8.self) }
            firedB += b.engine.advance(&b.users[ob].state, to: later, apps: b.apps).deliveries.map { String(decoding: $0.bodyBytes, as: UTF8.self) }
        }
        #expect(firedA.count > 10)
        #expect(firedA == firedB)
    }

    @Test func snapshotMidHistoryPlusTailEqualsTheWholeLogFolded() throws {
        let url = try TestPostgres.freshDatabase()
        // Run 1: phase 0, a snapshot taken while it runs; stopped.
        do {
            let server = try TestServer(url: url, start: Self.start) { $0.snapshotEveryEvents = 10 }
            let c = try server.client()
            try Self.send(c, Self.phase(0, users: 3))
            try Self.waitForSnapshot(url)
            server.stop()
        }
        // Run 2: restores from that snapshot; phase 1, timers fire (lean content loaded live), more events; stopped.
        let log = LogLines()
        do {
            let server = try TestServer(url: url, start: Self.start, log: log) { $0.snapshotEveryEvents = nil }
            let c = try server.client()
            let consumer = try server.client()
            _ = try consumer.call(["op": "subscribe", "consumer": "t"])
            try Self.send(c, Self.phase(1, users: 3))
            #expect(try c.call(["op": "clock", "advanceTo": "2026-11-23T09:15:00Z"])["ok"] == true)
            try Self.send(c, Self.phase(1, users: 2).map { ($0.op, Self.renamed($0.body)) })
            server.stop()
        }
        #expect(!log.matching("restored snapshot through seq").isEmpty, "run 2 started from the snapshot: \(log.all)")
        let conn = try PGConnection.connect(url)
        defer { conn.close() }
        let maxSeq = try conn.execute("SELECT max(seq) FROM events").int64(0, 0) ?? 0
        let snap = try #require(try SnapshotStore.latest(conn))
        #expect(snap.throughSeq > 10 && snap.throughSeq < maxSeq - 20, "a snapshot mid-history (through \(snap.throughSeq) of \(maxSeq))")
        // Replay (the whole log, content decoded from events) reproduces every stored delivery byte for byte,
        // including those the restarted service decided for lean items after loading their content.
        let replay = try Replayer().run(conn) { 0 }
        #expect(replay.differences.isEmpty)

        let whole = try Self.restored(url, snapshots: false)
        let fromSnapshot = try Self.restored(url, snapshots: true)
        try Self.expectSame(whole, fromSnapshot, advanceTo: "2026-11-27T00:00:00Z")
    }

    /// Another notification id for a request body (phase 1 sent twice).
    static func renamed(_ body: JSONValue, suffix: String = "-again") -> JSONValue {
        guard case .object(var o) = body, let id = o["id"]?.stringValue else { return body }
        o["id"] = .string(id + suffix)
        return .object(o)
    }

    @Test func captureInterleavedWithEventsStillRestoresExactly() throws {
        HeraldService.snapshotSliceUsers = 1  // one user per loop turn: events commit between slices
        let url = try TestPostgres.freshDatabase()
        let server = try TestServer(url: url, start: Self.start) { $0.snapshotEveryEvents = 5 }
        let c = try server.client()
        try Self.send(c, Self.phase(0, users: 4))
        let first = try Self.waitForSnapshot(url)
        #expect(try c.call(["op": "clock", "advanceTo": "2026-11-23T09:15:00Z"])["ok"] == true)
        // A producer keeps submitting while snapshots are captured a user per loop turn, until one
        // capture is seen to straddle events (a later slice already holds events after through_seq).
        let stop = LogLines()
        let producer = try server.client()
        let sender = Thread {
            var round = 0
            while stop.all.isEmpty {
                let requests = Self.phase(1, users: 4).map { ($0.op, Self.renamed($0.body, suffix: "-\(round)")) }
                for (op, body) in requests {
                    _ = try? producer.call(.object(body.objectValue!.merging(["op": .string(op)]) { a, _ in a }))
                }
                round += 1
            }
            stop.append("stopped")
        }
        sender.start()
        var last = first
        var interleaved = false
        for _ in 0..<60 where !interleaved {
            last = try Self.waitForSnapshot(url, after: last)
            let log = LogLines()
            _ = try Self.restored(url, snapshots: true, log: log)
            interleaved = log.matching("already in it").contains { !$0.contains("(0 already in it)") }
        }
        stop.append("stop")
        while stop.all.count < 2 { usleep(10_000) }
        #expect(interleaved, "a snapshot whose capture straddled committed events")
        server.stop()
        try Self.expectSame(Self.restored(url, snapshots: false), Self.restored(url, snapshots: true), advanceTo: "2026-11-27T00:00:00Z")
    }

    @Test func crashBetweenPartWritesAndCorruptSnapshotsAreIgnored() throws {
        let url = try TestPostgres.freshDatabase()
        do {
            let server = try TestServer(url: url, start: Self.start) { $0.snapshotEveryEvents = 10 }
            try Self.send(try server.client(), Self.phase(0, users: 3))
            try Self.waitForSnapshot(url)
            try Self.send(try server.client(), Self.phase(1, users: 3))
            server.stop()
        }
        let conn = try PGConnection.connect(url)
        defer { conn.close() }
        let good = try #require(try SnapshotStore.latest(conn))
        // A crash between part writes: a newer snapshot with one part stored and never completed.
        let max = try conn.execute("SELECT max(seq) FROM events").int64(0, 0) ?? 0
        let torn = try SnapshotStore.begin(conn, throughSeq: max, header: [SnapshotFormat.version, 0, 0])
        try SnapshotStore.writeParts(conn, id: torn, parts: [(0, 1, [9, 9, 9])])
        let whole = try Self.restored(url, snapshots: false)
        let log = LogLines()
        let b = try Self.restored(url, snapshots: true, log: log)
        #expect(!log.matching("snapshot \(good.id) through seq").isEmpty, "the complete snapshot is used, not the torn one: \(log.all)")
        try Self.expectSame(whole, b, advanceTo: "2026-11-27T00:00:00Z")

        // A complete snapshot whose bytes do not decode: start-up folds the whole log instead.
        let bad = try SnapshotStore.begin(conn, throughSeq: max, header: [SnapshotFormat.version, 0, 0])
        try SnapshotStore.writeParts(conn, id: bad, parts: [(0, 1, [5, 1, 2, 3, 4, 5])])
        try SnapshotStore.complete(conn, id: bad, users: 1, parts: 1, bytes: 6)
        let log2 = LogLines()
        let c = try Self.restored(url, snapshots: true, log: log2)
        #expect(!log2.matching("could not be loaded", "folding the whole log").isEmpty, "\(log2.all)")
        try Self.expectSame(Self.restored(url, snapshots: false), c, advanceTo: "2026-11-27T00:00:00Z")
    }

    @Test func aLogWithoutASnapshotStartsAndThenWritesOne() throws {
        let url = try TestPostgres.freshDatabase()
        do {
            let server = try TestServer(url: url, start: Self.start) { $0.snapshotEveryEvents = nil }
            try Self.send(try server.client(), Self.phase(0, users: 2))
            server.stop()
        }
        let log = LogLines()
        let server = try TestServer(url: url, start: Self.start, log: log) { $0.snapshotEveryEvents = 10 }
        #expect(!log.matching("(no snapshot)").isEmpty, "\(log.all)")
        try Self.waitForSnapshot(url)
        server.stop()
        try Self.expectSame(Self.restored(url, snapshots: false), Self.restored(url, snapshots: true), advanceTo: "2026-11-27T00:00:00Z")
    }
}


@Suite struct PendingMemoryTests {
    /// What one pending deferred notification and one user cost inline (printed for docs/restart.md).
    @Test func layoutIsPrinted() {
        print("layout: PendingItem \(MemoryLayout<PendingItem>.stride) B, DueTimer \(MemoryLayout<DueTimer>.stride) B, "
              + "UserState \(MemoryLayout<UserState>.stride) B, UserRecord \(MemoryLayout<UserRecord>.stride) B, "
              + "SummaryCalendar? \(MemoryLayout<SummaryCalendar?>.stride) B, FocusState \(MemoryLayout<FocusState>.stride) B, RareFields \(MemoryLayout<RareFields>.stride) B, GlobalSettings \(MemoryLayout<GlobalSettings>.stride) B")
        #expect(MemoryLayout<PendingItem>.stride <= 128)
    }
}
