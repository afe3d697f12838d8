// Erasure (SPEC §14, issue 45 experiment 1): a user's content is unreadable afterwards; decisions stay and replay proves them.
import Foundation
import HeraldCore
import HeraldRuntime
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct ErasureTests {
    static let mail = "com.example.mail"
    static let chat = "com.example.chat"

    /// The content strings of erin's notification `i`: title, subtitle, body, placeholder, data,
    /// sender name and action title each carry one.
    static func secrets(_ i: Int, of user: String = "erin") -> [String] {
        ["title", "subtitle", "body", "placeholder", "data", "sender", "action"].map { "\(user)-\($0)-\(i)x" }
    }

    static func submit(_ i: Int, app: String, user: String = "erin", extra: [String: JSONValue] = [:]) -> JSONValue {
        let s = secrets(i, of: user)
        var o: [String: JSONValue] = [
            "op": "submit", "id": .string("n\(i)"), "app": .string(app), "user": .string(user),
            "title": .string(s[0]), "subtitle": .string(s[1]), "body": .string(s[2]), "hiddenPreviewsBodyPlaceholder": .string(s[3]),
            "data": .object(["note": .string(s[4])]), "actions": .array([.object(["id": "ok", "title": .string(s[6])])]),
        ]
        if app == chat { o["communication"] = .object(["sender": .string(s[5])]) }
        for (k, v) in extra { o[k] = v }
        return .object(o)
    }

    /// A user with 1,000 notifications — queued for a summary, delivered (some snoozed), held by a
    /// Focus, deferred — is erased: `pg_dump` and `herald export` afterwards hold none of their
    /// content strings; `explain` and `state` work and say the content was erased; replay is
    /// byte-identical on decisions; the user's next submit is delivered with its content.
    @Test func anErasedUsersContentIsUnreadableWhileDecisionsStayAndReplayHolds() throws {
        let server = try TestServer(start: "2026-03-27T07:00:00Z")
        let c = try server.client()
        func ok(_ request: JSONValue) throws {
            let r = try c.call(request)
            #expect(r["ok"] == true, "\(request.canonicalString) → \(r.canonicalString)")
        }
        try ok(["op": "registerApp", "app": .string(Self.chat), "entitlements": ["communication"]])
        try ok(["op": "registerApp", "app": .string(Self.mail), "entitlements": []])
        for user in ["erin", "frank"] {
            for app in [Self.mail, Self.chat] {
                try ok(["op": "authorization", "user": .string(user), "app": .string(app), "status": "authorized", "options": ["alert", "sound", "badge"]])
            }
        }
        try ok(["op": "settings", "user": "erin", "app": .string(Self.mail), "delivery": "summary"])
        try ok(["op": "summarySchedule", "user": "erin", "times": ["18:00"], "timeZone": "UTC"])
        // 250 queued for the 18:00 summary, 250 delivered (50 of them snoozed), 250 deferred, 250 held.
        for i in 0..<250 { try ok(Self.submit(i, app: Self.mail)) }
        for i in 250..<500 { try ok(Self.submit(i, app: Self.chat)) }
        for i in 250..<300 { try ok(["op": "snooze", "user": "erin", "app": .string(Self.chat), "id": .string("n\(i)"), "until": "2026-03-27T20:00:00Z"]) }
        for i in 500..<750 { try ok(Self.submit(i, app: Self.chat, extra: ["deliverAt": "2026-03-27T19:00:00Z"])) }
        try ok(["op": "focusOn", "user": "erin", "focus": "Work"])
        for i in 750..<1000 { try ok(Self.submit(i, app: Self.chat)) }
        for i in 0..<5 { try ok(Self.submit(i, app: Self.chat, user: "frank")) }

        // Before the erasure the export reads the content (opened with erin's key).
        let before = try HeraldCommandTests.herald(["export", "--database-url", server.url])
        #expect(Self.secrets(999).allSatisfy { before.stdout.contains($0) } && !before.stdout.contains("contentErased"))

        let erase = try HeraldCommandTests.herald(["erase", "erin", "--connect", "127.0.0.1:\(server.port)", "--token", "dev-token"])
        #expect(erase.status == 0 && erase.stdout.contains("erased the content of erin"), "\(erase)")

        // Held ones come out in the digest, the rest as their timers fire: without content.
        try ok(["op": "focusOff", "user": "erin", "focus": "Work"])
        try ok(["op": "submit", "id": "after", "app": .string(Self.chat), "user": "erin", "title": "erin-new-title",
                "body": "erin-new-body", "hiddenPreviewsBodyPlaceholder": "erin-new-placeholder"])
        try ok(["op": "clock", "advanceTo": "2026-03-27T21:00:00Z"])
        server.stop()

        let conn = try PGConnection.connect(server.url)
        let after = try conn.execute("SELECT kind FROM deliveries WHERE user_id = 'erin' AND notification_id = 'after'")
        #expect(after.rowCount == 1 && after.string(0, 0) == "alert", "the next submit is delivered normally")
        let kinds = try conn.execute("SELECT kind, count(*) FROM deliveries WHERE user_id = 'erin' GROUP BY kind ORDER BY kind")
        let byKind = Dictionary(uniqueKeysWithValues: (0..<kinds.rowCount).map { (kinds.string($0, 0) ?? "", kinds.int64($0, 1) ?? 0) })
        #expect((byKind["held"] ?? 0) >= 250 && (byKind["queued"] ?? 0) >= 250 && (byKind["summary"] ?? 0) >= 1 && (byKind["focusDigest"] ?? 0) >= 1,
                "\(byKind)")

        // pg_dump of the whole database: none of erin's content strings (every one begins "erin-"),
        // in text columns nor in bytea ones (snapshots), where pg_dump writes hex.
        let dump = try Self.pgDump(server.url)
        #expect(Self.followers(of: "erin-", in: dump).isEmpty, "content in pg_dump: \(Self.followers(of: "erin-", in: dump).prefix(5))")
        #expect(!dump.contains(Self.hex("erin-")), "content in a bytea column of pg_dump")
        #expect(!dump.contains("frank-title-0x") && dump.contains(#""sealed":""#), "content is stored sealed, a user's who was not erased too")

        // The export: erin's earlier content erased; frank's and erin's later notification readable.
        let export = try HeraldCommandTests.herald(["export", "--database-url", server.url])
        #expect(export.status == 0)
        let exported = Self.followers(of: "erin-", in: export.stdout).filter { !$0.hasPrefix("new-") }
        #expect(exported.isEmpty, "erased content in the export: \(exported.prefix(5))")
        #expect(export.stdout.contains("erin-new-title") && export.stdout.contains("contentErased"))
        #expect(Self.secrets(0, of: "frank").allSatisfy { export.stdout.contains($0) }, "frank's content is not erased")

        // explain and state work and say so.
        let explain = try HeraldCommandTests.herald(["explain", Self.chat, "n800", "--database-url", server.url])
        #expect(explain.status == 0 && explain.stdout.contains("content erased") && !explain.stdout.contains("erin-title-800x"), "\(explain)")
        let state = try HeraldCommandTests.herald(["state", "erin", "--database-url", server.url, "--json"])
        #expect(state.status == 0 && state.stdout.contains("content erased"), "\(state)")

        // Replay: every decision derived again byte for byte (content compared where it exists).
        let replay = try HeraldCommandTests.herald(["replay", "--database-url", server.url])
        #expect(replay.status == 0, "\(replay)")
        let keys = try conn.execute("SELECT count(*) FROM user_keys WHERE user_id = 'erin'")
        #expect(keys.int64(0, 0) == 1, "erin's later content has a key of its own")
    }

    /// The 12 characters after each occurrence of `prefix` in `text`.
    static func followers(of prefix: String, in text: String) -> [String] {
        text.components(separatedBy: prefix).dropFirst().map { String($0.prefix(12)) }
    }

    static func hex(_ s: String) -> String { s.utf8.map { String(format: "%02x", $0) }.joined() }

    static func pgDump(_ url: String) throws -> String {
        let bins = ((try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? [])
            .sorted { (Int($0) ?? 0) > (Int($1) ?? 0) }.map { "/usr/lib/postgresql/\($0)/bin/pg_dump" }
        guard let pgDump = (bins + ["/usr/bin/pg_dump"]).first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw ExperimentError("pg_dump was not found (apt-get install postgresql-client)")
        }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: pgDump)
        p.arguments = ["--no-owner", "-d", url]
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("erasure-dump-\(getpid()).sql")
        _ = FileManager.default.createFile(atPath: out.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: out) }
        p.standardOutput = try FileHandle(forWritingTo: out)
        p.standardError = FileHandle.nullDevice
        try p.run()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else { throw ExperimentError("pg_dump exited \(p.terminationStatus)") }
        return try String(contentsOf: out, encoding: .utf8)
    }
}
