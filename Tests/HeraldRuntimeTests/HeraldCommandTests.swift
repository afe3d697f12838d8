// The built `herald` one-shot commands as a script meets them: exit codes (README: 0 success,
// 1 differences, 2 an error), stderr texts, and what replay --what-if / explain / state accept.
import Foundation
import HeraldCore
import HeraldRuntime
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct HeraldCommandTests {
    struct Outcome: CustomStringConvertible {
        var status: Int32
        var stdout: String
        var stderr: String
        var description: String { "exit \(status)\nstdout: \(stdout)\nstderr: \(stderr)" }
    }

    /// Runs the built `herald` with `arguments` (output through files: no pipe to fill up).
    /// `input` is its stdin (none: /dev/null); `directory` its working directory (none: this process's).
    static func herald(_ arguments: [String], environment extra: [String: String] = [:], input: String? = nil,
                       directory: String? = nil) throws -> Outcome {
        let dir = FileManager.default.temporaryDirectory.path
        let tag = "herald-cmd-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let out = "\(dir)/\(tag).out", err = "\(dir)/\(tag).err", inFile = "\(dir)/\(tag).in"
        _ = FileManager.default.createFile(atPath: out, contents: nil)
        _ = FileManager.default.createFile(atPath: err, contents: nil)
        defer { for f in [out, err, inFile] { try? FileManager.default.removeItem(atPath: f) } }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: try ServeProcess.findBinary())
        p.arguments = arguments
        p.environment = ProcessInfo.processInfo.environment.filter { $0.key != "HERALD_DATABASE_URL" }.merging(extra) { $1 }
        if let directory { p.currentDirectoryURL = URL(fileURLWithPath: directory) }
        if let input {
            _ = FileManager.default.createFile(atPath: inFile, contents: Data(input.utf8))
            p.standardInput = try FileHandle(forReadingFrom: URL(fileURLWithPath: inFile))
        } else {
            p.standardInput = FileHandle.nullDevice
        }
        p.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: out))
        p.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: err))
        try p.run()
        p.waitUntilExit()
        return Outcome(status: p.terminationStatus, stdout: try String(contentsOfFile: out, encoding: .utf8),
                       stderr: try String(contentsOfFile: err, encoding: .utf8))
    }

    /// A log with one authorized user, alice, and one notification, com.example.mail m1.
    static func aliceLog() throws -> String {
        let server = try TestServer(start: "2026-03-27T07:00:00Z")
        defer { server.stop() }
        let c = try server.client()
        _ = try c.call(["op": "authorization", "user": "alice", "app": "com.example.mail", "status": "authorized", "options": ["alert"]])
        _ = try c.call(["op": "submit", "id": "m1", "app": "com.example.mail", "user": "alice", "title": "T", "body": "B",
                        "hiddenPreviewsBodyPlaceholder": "x"])
        _ = try c.call(["op": "clock", "advanceTo": "2026-03-27T09:00:00Z"])
        return server.url
    }

    /// SPEC §10 "every scheduled decision (deferred, queued for a summary, held, Focus and mute
    /// ends) is listable per user and overall (`herald pending`)": the Focus in force with its
    /// next change and the mutes not over are listed, as of the log's latest instant; `state`
    /// shows them too. A mute that ended is not.
    @Test func pendingListsTheFocusInForceAndTheMutesNotOver() throws {
        let server = try TestServer(start: "2026-03-27T07:00:00Z")
        let c = try server.client()
        let mail = "com.example.mail", chat = "com.example.chat"
        for app in [mail, chat] {
            _ = try c.call(["op": "authorization", "user": "bob", "app": .string(app), "status": "authorized", "options": ["alert"]])
        }
        _ = try c.call(["op": "focusDefine", "user": "bob", "focus": "Work"])
        _ = try c.call(["op": "focusOn", "user": "bob", "focus": "Work", "until": "2026-03-27T16:00:00Z"])
        _ = try c.call(["op": "mute", "user": "bob", "app": .string(mail), "until": "2026-03-27T12:00:00Z"])
        _ = try c.call(["op": "mute", "user": "bob", "app": .string(chat), "until": "2026-03-27T08:00:00Z"])
        _ = try c.call(["op": "clock", "advanceTo": "2026-03-27T09:00:00Z"])
        server.stop()
        let pending = try Self.herald(["pending", "--database-url", server.url, "--json"])
        #expect(pending.status == 0, "\(pending)")
        let line = try JSONValue.parse(pending.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(line["user"] == "bob")
        #expect(line["activeFocus"] == ["focus": "Work", "manual": true, "nextChange": "2026-03-27T16:00:00Z"], "\(pending)")
        #expect(line["mutes"] == [["app": .string(mail), "until": "2026-03-27T12:00:00Z"]], "\(pending)")
        let state = try Self.herald(["state", "bob", "--database-url", server.url, "--json"])
        let s = try JSONValue.parse(state.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(s["at"] == "2026-03-27T09:00:00Z" && s["activeFocus"]?["focus"] == "Work" && s["mutes"]?.arrayValue?.count == 1, "\(state)")
    }

    /// `herald pending` with nothing scheduled says so on stdout, where its table goes (it printed
    /// nothing); `--json` still prints one line per user with something pending, so none.
    @Test func pendingSaysWhenNothingIsPending() throws {
        let url = try Self.aliceLog()
        let all = try Self.herald(["pending", "--database-url", url])
        #expect(all.status == 0 && all.stdout == "nothing is pending\n" && all.stderr.isEmpty, "\(all)")
        let alice = try Self.herald(["pending", "--user", "alice", "--database-url", url])
        #expect(alice.status == 0 && alice.stdout == "nothing is pending for alice\n" && alice.stderr.isEmpty, "\(alice)")
        let json = try Self.herald(["pending", "--json", "--database-url", url])
        #expect(json.status == 0 && json.stdout.isEmpty && json.stderr.isEmpty, "\(json)")
    }

    /// `herald explain` shows "the user's state then": for a decision made after the submit (here
    /// a deferred one, quieted by a mute set in between) the state of the decision's instant, not
    /// only the state before the submit, which knew no mute.
    @Test func explainOfADeferredDecisionShowsTheStateItMet() throws {
        let server = try TestServer(start: "2026-03-27T07:00:00Z")
        let c = try server.client()
        let mail = "com.example.mail"
        _ = try c.call(["op": "authorization", "user": "alice", "app": .string(mail), "status": "authorized", "options": ["alert"]])
        _ = try c.call(["op": "focusOn", "user": "alice", "focus": "Work", "until": "2026-03-27T08:00:00Z"])
        _ = try c.call(["op": "submit", "id": "m2", "app": .string(mail), "user": "alice", "title": "T", "body": "B",
                        "hiddenPreviewsBodyPlaceholder": "x", "deliverAt": "2026-03-27T10:00:00Z"])
        _ = try c.call(["op": "mute", "user": "alice", "app": .string(mail), "until": "2026-03-27T12:00:00Z"])
        _ = try c.call(["op": "clock", "advanceTo": "2026-03-27T11:00:00Z"])
        server.stop()
        let out = try Self.herald(["explain", mail, "m2", "--database-url", server.url, "--json"])
        #expect(out.status == 0, "\(out)")
        let story = try JSONValue.parse(out.stdout.trimmingCharacters(in: .whitespacesAndNewlines))["recipients"]?.arrayValue?.first
        let decision = story?["deliveries"]?.arrayValue?.first
        #expect(decision?["reason"] == "muted" && decision?["delivery"]?["at"] == "2026-03-27T10:00:00Z", "\(out)")
        #expect(story?["stateBefore"]?["apps"]?[mail]?["mutedUntil"] == nil)
        // The state before shows the Focus in force at the submit.
        #expect(story?["stateBefore"]?["activeFocus"]?["focus"] == "Work" && story?["stateBefore"]?["at"] == "2026-03-27T07:00:00Z", "\(out)")
        #expect(decision?["stateMet"]?["mutes"] == [["app": .string(mail), "until": "2026-03-27T12:00:00Z"]], "\(out)")
        #expect(decision?["stateMet"]?["pending"]?.arrayValue?.first?["notification"] == "m2", "still to be decided then")
    }

    /// `herald tail --connect` takes a host name; one that does not resolve is said so (it was
    /// tried as 0.0.0.0 and reported "Connection refused").
    @Test func tailSaysWhenItCannotResolveTheHostName() throws {
        let out = try Self.herald(["tail", "--connect", "no-such-host.invalid:7411", "--idle-exit", "1"])
        #expect(out.status == 2 && out.stderr.contains("cannot resolve the host name"), "\(out)")
    }

    /// `herald tail --limit N` waits for its acks before it exits: it closed at once, the server
    /// dropped the acks it had not read yet, and the next run printed the same lines again (over a
    /// backlog, repeated runs made no progress). Two runs of 50 print cursors 1–100 once each.
    @Test func tailWithALimitKeepsItsAcksSoTheNextRunGoesOn() throws {
        let server = try TestServer(start: "2026-03-27T07:00:00Z")
        defer { server.stop() }
        let c = try server.client()
        _ = try c.call(["op": "authorization", "user": "alice", "app": "com.example.mail", "status": "authorized", "options": ["alert"]])
        for i in 1...150 {
            try c.send(#"{"op":"submit","id":"m\#(i)","app":"com.example.mail","user":"alice","title":"T","body":"B","hiddenPreviewsBodyPlaceholder":"x"}"#)
        }
        for _ in 1...150 { _ = try c.readJSON() }
        _ = try c.call(["op": "clock", "advanceTo": "2026-03-27T07:00:01Z"])  // replies once the deliveries are committed
        var cursors: [Int64] = []
        for from in [["--from", "earliest"], []] {
            let run = try Self.herald(["tail", "--connect", "127.0.0.1:\(server.port)", "--consumer", "audit", "--limit", "50"] + from)
            #expect(run.status == 0, "\(run)")
            cursors += run.stdout.split(separator: "\n").compactMap { try? JSONValue.parse(String($0))["cursor"]?.intValue }
        }
        #expect(cursors == Array(1...100), "\(cursors.first ?? 0)…\(cursors.last ?? 0), \(cursors.count) lines")
    }

    /// `herald tail --token` shows the token to every local user in `ps`, so `tail` also reads it
    /// from `--token-file` or `$HERALD_TOKEN`.
    @Test func tailReadsItsTokenFromAFileOrTheEnvironment() throws {
        let tokens = TokenTable(["ops-secret-token": Grant(name: "ops", roles: [.admin, .settings, .consumer, .producer], apps: nil)])
        let server = try TestServer(start: "2026-03-27T07:00:00Z", tokens: tokens)
        defer { server.stop() }
        let c = try server.client(token: "ops-secret-token")
        _ = try c.call(["op": "authorization", "user": "alice", "app": "com.example.mail", "status": "authorized", "options": ["alert"]])
        _ = try c.call(["op": "submit", "id": "m1", "app": "com.example.mail", "user": "alice", "title": "T", "body": "B", "hiddenPreviewsBodyPlaceholder": "x"])
        _ = try c.call(["op": "clock", "advanceTo": "2026-03-27T07:00:01Z"])  // replies once the deliveries are committed
        let file = FileManager.default.temporaryDirectory.path + "/herald-token-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try "ops-secret-token\n".write(toFile: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: file) }
        let tail = ["tail", "--connect", "127.0.0.1:\(server.port)", "--from", "earliest", "--limit", "1", "--idle-exit", "20"]
        let fromFile = try Self.herald(tail + ["--consumer", "a", "--token-file", file])
        #expect(fromFile.status == 0 && fromFile.stdout.contains("m1"), "\(fromFile)")
        let fromEnvironment = try Self.herald(tail + ["--consumer", "b"], environment: ["HERALD_TOKEN": "ops-secret-token"])
        #expect(fromEnvironment.status == 0 && fromEnvironment.stdout.contains("m1"), "\(fromEnvironment)")
        let wrong = try Self.herald(tail + ["--consumer", "c"], environment: ["HERALD_TOKEN": "not-the-token"])
        #expect(wrong.status != 0 && wrong.stderr.contains("invalid_token"), "\(wrong)")
        let missing = try Self.herald(tail + ["--token-file", file + ".missing"])
        #expect(missing.status == 2 && missing.stderr.contains("Cannot read --token-file"), "\(missing)")
    }

    @Test func aWhatIfAtThatIsNotRFC3339IsAnErrorNamingTheValueAndTheForm() throws {
        let url = try Self.aliceLog()
        let bad = try Self.herald(["replay", "--database-url", url, "--what-if",
                                   #"{"op":"settings","user":"alice","app":"com.example.mail","delivery":"summary","at":"2026-03-02 08:00"}"#])
        #expect(bad.status == 2, "\(bad)")
        #expect(bad.stderr.contains("2026-03-02 08:00") && bad.stderr.contains("RFC 3339") && bad.stderr.contains("2026-03-02T08:00:00Z"), "\(bad)")
        #expect(!bad.stdout.contains("what-if:"), "nothing was replayed: \(bad)")
        // Without "at" the request applies before the first event (documented in --help and README).
        let always = try Self.herald(["replay", "--database-url", url, "--what-if",
                                      #"{"op":"settings","user":"alice","app":"com.example.mail","delivery":"summary"}"#])
        #expect(always.status == 0, "\(always)")
        #expect(always.stdout.contains("com.example.mail m1") && always.stdout.contains("what-if: "), "\(always)")

        // --json applies to what-if runs too (it printed text): the changed decisions as objects.
        for extra in [["--what-if", #"{"op":"settings","user":"alice","app":"com.example.mail","delivery":"summary"}"#],
                      ["--rules-version", "1"]] {
            let r = try Self.herald(["replay", "--database-url", url, "--json"] + extra)
            #expect(r.status == 0, "\(r)")
            let parsed = try JSONValue.parse(r.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
            #expect(parsed["whatIf"] == .bool(true), "\(r)")
            if extra[0] == "--what-if" {
                let subjects = parsed["changes"]?.arrayValue?.compactMap { $0["subject"]?.stringValue } ?? []
                #expect(parsed["changed"]?.intValue == Int64(subjects.count) && subjects.contains("com.example.mail m1"), "\(r)")
            }
        }
    }

    /// `replay --until` past the last event replays the whole log (exit 0 on a clean one) and says
    /// so on stderr, so a mistyped seq does not pass for a prefix.
    @Test func replayUntilPastTheLastEventSaysTheWholeLogWasReplayed() throws {
        let url = try Self.aliceLog()
        let head = try EventReader.head(PGConnection.connect(url))
        let past = try Self.herald(["replay", "--database-url", url, "--until", String(head + 50)])
        #expect(past.status == 0 && past.stderr.contains("is past the log's last event (seq \(head))"), "\(past)")
        let within = try Self.herald(["replay", "--database-url", url, "--until", String(head)])
        #expect(within.status == 0 && !within.stderr.contains("past the log's last event"), "\(within)")
    }

    @Test func explainListsOnlyTheDeliveriesThatCarriedThisAppsNotification() throws {
        let server = try TestServer(start: "2026-03-27T07:00:00Z")
        let c = try server.client()
        for app in ["com.example.mail", "com.example.news"] {
            _ = try c.call(["op": "authorization", "user": "alice", "app": .string(app), "status": "authorized", "options": ["alert"]])
        }
        _ = try c.call(["op": "settings", "user": "alice", "app": "com.example.news", "delivery": "summary"])
        for app in ["com.example.mail", "com.example.news"] {
            _ = try c.call(["op": "submit", "id": "m6", "app": .string(app), "user": "alice", "title": "T", "body": "B",
                            "hiddenPreviewsBodyPlaceholder": "x"])
        }
        _ = try c.call(["op": "clock", "advanceTo": "2026-03-27T09:00:00Z"])
        server.stop()
        let summaries = try PGConnection.connect(server.url).execute("SELECT count(*) FROM deliveries WHERE kind = 'summary'")
        #expect(summaries.int64(0, 0) == 1, "the 08:00 summary carried news' m6")

        func kinds(_ app: String) throws -> [String] {
            let r = try Self.herald(["explain", "--database-url", server.url, app, "m6", "--json"])
            #expect(r.status == 0, "\(r)")
            let doc = try JSONValue.parse(r.stdout)
            let deliveries = doc["recipients"]?.arrayValue?.first?["deliveries"]?.arrayValue ?? []
            return deliveries.compactMap { $0["kind"]?.stringValue }
        }
        #expect(try kinds("com.example.mail") == ["alert"], "not news' summary, which carried another app's m6")
        let news = try kinds("com.example.news")
        #expect(news.last == "summary" && !news.contains("alert"), "\(news)")
    }

    @Test func unknownUsersAndNotificationsAreErrorsSayingTheyHaveNoEvents() throws {
        let url = try Self.aliceLog()
        let cases: [([String], String)] = [
            (["state", "nobody"], "user “nobody” has no events in the log"),
            (["pending", "--user", "nobody"], "user “nobody” has no events in the log"),
            (["replay", "--users", "nobody"], "user “nobody” has no events in the log"),
            (["replay", "--users", "alice,nobody,zed"], "users “nobody”, “zed” have no events in the log"),
            (["replay", "--what-if", #"{"op":"settings","user":"nobody","app":"com.example.mail","delivery":"summary"}"#],
             "user “nobody” has no events in the log"),
            (["explain", "com.nope", "m1"], "notification “m1” of app “com.nope” has no events in the log"),
            (["explain", "com.example.mail", "m2"], "notification “m2” of app “com.example.mail” has no events in the log"),
        ]
        for (arguments, message) in cases {
            let r = try Self.herald(arguments + ["--database-url", url])
            #expect(r.status == 2, "\(arguments): \(r)")
            #expect(r.stderr.contains(message), "\(arguments): \(r)")
            #expect(r.stdout.isEmpty, "\(arguments): \(r)")
        }
        // Known names: unchanged.
        let state = try Self.herald(["state", "alice", "--json", "--database-url", url])
        #expect(state.status == 0 && (try? JSONValue.parse(state.stdout))?["user"] == "alice", "\(state)")
        let pending = try Self.herald(["pending", "--user", "alice", "--database-url", url])
        #expect(pending.status == 0 && pending.stderr.isEmpty, "\(pending)")
        let explain = try Self.herald(["explain", "com.example.mail", "m1", "--database-url", url])
        #expect(explain.status == 0 && explain.stdout.contains("com.example.mail m1 → alice"), "\(explain)")
        let replay = try Self.herald(["replay", "--users", "alice", "--database-url", url])
        #expect(replay.status == 0 && replay.stdout.contains("0 differences"), "\(replay)")
    }

    @Test func usageErrorsExitTwoLikeEveryOtherErrorAndNeverOne() throws {
        let url = try Self.aliceLog()
        let cases: [[String]] = [
            ["state", "alice", "--at", "yesterday"],
            ["state", "alice", "--at=-3"],
            ["replay", "--rules-version", "9"],
            ["replay", "--until", "-3"],
            ["replay", "--until=-3"],
            ["replay", "--until", "tomorrow"],
            ["replay", "--what-if", "notjson"],
            ["replay", "--what-if", #"{"op":"settings","user":"alice","app":"com.example.mail","delivery":"bogus"}"#],
            ["replay", "--what-if", #"{"op":"registerApp","app":"com.example.x","entitlements":[]}"#],
            ["replay", "--no-such-option"],
            ["explain", "com.example.mail"],
            // Read-only commands do not offer the flag that drops a private database.
            ["state", "alice", "--fresh-private-database"],
            ["explain", "com.example.mail", "m1", "--fresh-private-database"],
            ["pending", "--fresh-private-database"],
            ["replay", "--fresh-private-database"],
            ["export", "--fresh-private-database"],
            ["migrate", "--fresh-private-database"],
        ]
        for arguments in cases {
            let r = try Self.herald(arguments + ["--database-url", url])
            #expect(r.status == 2, "\(arguments): \(r)")
            #expect(!r.stderr.isEmpty, "\(arguments) says why: \(r)")
        }
        #expect(try Self.herald(["replay", "--help"]).status == 0)
        for command in ["state", "explain", "pending", "replay", "export", "migrate"] {
            #expect(!(try Self.herald([command, "--help"]).stdout.contains("fresh-private-database")), "\(command)")
        }
        #expect(try Self.herald(["serve", "--help"]).stdout.contains("fresh-private-database"))
        #expect(try Self.herald(["import", "--help"]).stdout.contains("fresh-private-database"))
        // And the log is still there.
        #expect(try Self.herald(["state", "alice", "--database-url", url]).status == 0)
    }

    /// `serve` on a port another process listens on says so before any database work: here the
    /// database cannot be reached at all, and the port is what is reported (it came only after
    /// migrations and a full restore).
    @Test func serveReportsAPortInUseBeforeAnyDatabaseWork() throws {
        let server = try TestServer(start: "2026-03-27T07:00:00Z")
        defer { server.stop() }
        let closed = "host=127.0.0.1 port=\(LocalClusterPort.free()) user=postgres dbname=herald connect_timeout=5"
        let r = try Self.herald(["serve", "--listen", "127.0.0.1:\(server.port)", "--database-url", closed])
        #expect(r.status == 2 && r.stderr.contains("Could not listen on 127.0.0.1:\(server.port)")
                && r.stderr.contains("Is another process using the port") && !r.stderr.contains("unreachable"), "\(r)")
    }

    /// `serve --port` points to `--listen` (ArgumentParser's nearest name was `--start`).
    @Test func servePortPointsToListen() throws {
        let r = try Self.herald(["serve", "--port", "7500"])
        #expect(r.status == 2 && r.stderr.contains("use --listen HOST:PORT") && r.stderr.contains("127.0.0.1:7500")
                && !r.stderr.contains("--start"), "\(r)")
    }

    /// The private cluster keeps the port it chose across starts, and `herald db url` prints a
    /// URL of it that names a role and a database that exist (`psql "$(herald db url)"`; psql as
    /// the Unix user failed with `role "root" does not exist`). PostgreSQL's own notices (here
    /// `database "herald" does not exist, skipping` from --fresh-private-database) stay off the terminal.
    @Test func thePrivateClusterKeepsItsPortAndDbURLReachesIt() throws {
        let folder = FileManager.default.temporaryDirectory.path + "/herald-db-url-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let cluster = try LocalCluster(dataDirectory: folder + "/.herald/postgres")
        defer {
            cluster.stop()
            try? FileManager.default.removeItem(atPath: folder)
        }
        func port(_ r: Outcome) -> Int? {
            guard let range = r.stderr.range(of: "private PostgreSQL listening on 127.0.0.1:") else { return nil }
            return Int(r.stderr[range.upperBound...].prefix { $0.isNumber })
        }
        let first = try Self.herald(["import", "--fresh-private-database"], input: #"{"end":{"deliveries":0,"events":0}}"# + "\n",
                                    directory: folder)
        #expect(first.status == 0 && port(first) != nil, "\(first)")
        #expect(!first.stderr.contains("NOTICE") && !first.stderr.contains("skipping"), "\(first)")
        let second = try Self.herald(["migrate"], directory: folder)
        #expect(second.status == 0 && port(second) != nil && port(second) == port(first), "stopped in between, started again: \(second)")

        // Started here, not by `herald db url`: a server it leaves running would hold the pipe by
        // which Foundation's Process learns that its child exited.
        try cluster.start()
        #expect(cluster.port == port(first))
        let url = try Self.herald(["db", "url"], directory: folder)
        #expect(url.status == 0 && url.stdout == "postgresql://postgres@127.0.0.1:\(port(first) ?? 0)/herald\n", "\(url)")
        let psql = Process()
        psql.executableURL = URL(fileURLWithPath: "/usr/bin/psql")
        psql.arguments = [url.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "-Atc", "SELECT current_user || ' ' || current_database()"]
        let pipe = Pipe()
        psql.standardOutput = pipe
        try psql.run()
        let answer = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        psql.waitUntilExit()
        #expect(psql.terminationStatus == 0 && answer == "postgres herald\n", "\(answer)")
        // A database URL given is printed as given.
        let given = try Self.herald(["db", "url", "--database-url", "host=db.internal dbname=herald"])
        #expect(given.status == 0 && given.stdout == "host=db.internal dbname=herald\n", "\(given)")
    }

    /// `herald --version` prints the version the hello reply's "server" names.
    @Test func versionPrintsTheVersionTheHelloReplyNames() throws {
        let out = try Self.herald(["--version"])
        #expect(out.status == 0 && out.stdout == "herald \(HeraldVersion.number)\n", "\(out)")
        #expect(ServiceConfiguration(databaseURL: "").serverName == "herald/\(HeraldVersion.number)")
    }

    /// `herald token new` makes a token (32 random bytes in hex, a new one each run) and prints the
    /// hash `herald token hash` prints for it, saying that the hash is what the tokens file holds.
    @Test func tokenNewPrintsAFreshTokenAndTheHashTheTokensFileHolds() throws {
        func made() throws -> (token: String, hash: String, text: String) {
            let out = try Self.herald(["token", "new"])
            #expect(out.status == 0, "\(out)")
            let lines = out.stdout.split(separator: "\n").map(String.init)
            let token = lines.first { $0.hasPrefix("token:") }.map { String($0.dropFirst(6)).trimmingCharacters(in: .whitespaces) } ?? ""
            let hash = lines.first { $0.hasPrefix("sha256:") }.map { String($0.dropFirst(7)).trimmingCharacters(in: .whitespaces) } ?? ""
            return (token, hash, out.stdout)
        }
        let first = try made(), second = try made()
        let hexDigits = Set("0123456789abcdef")
        #expect(first.token.count == 64 && first.token.allSatisfy(hexDigits.contains), "\(first.text)")
        #expect(first.token != second.token && first.hash != second.hash)
        let hashed = try Self.herald(["token", "hash"], input: first.token + "\n")
        #expect(hashed.status == 0 && hashed.stdout == first.hash + "\n", "\(hashed)")
        #expect(first.text.contains("tokens file") && first.text.contains(#""sha256": "\#(first.hash)""#), "\(first.text)")
    }

    @Test func oneShotCommandsSayWhatToDoAboutADatabaseTheyCannotUse() throws {
        // Unreachable: a port nothing listens on. A one-shot command gives up at once.
        let closed = "host=127.0.0.1 port=\(LocalClusterPort.free()) user=postgres dbname=herald connect_timeout=5"
        let unreachable = try Self.herald(["state", "alice", "--database-url", closed])
        #expect(unreachable.status == 2, "\(unreachable)")
        #expect(unreachable.stderr.contains("unreachable") && !unreachable.stderr.contains("retries"), "\(unreachable)")
        #expect(StoreError.unavailable("x").description.contains("Herald retries by itself"), "serve keeps its wording")

        // A URL libpq cannot parse is said so, not "unreachable"; serve alike.
        for garbage in ["garbage", "postgres://[::1/herald"] {
            for arguments in [["state", "alice"], ["serve", "--listen", "127.0.0.1:\(LocalClusterPort.free())"]] {
                let r = try Self.herald(arguments + ["--database-url", garbage])
                #expect(r.status == 2 && r.stderr.contains("The database URL does not parse")
                        && !r.stderr.contains("unreachable"), "\(arguments) \(garbage): \(r)")
            }
        }

        // The server answers, but the database is not there (3D000): not "unreachable".
        let missingName = "herald_missing_\(getpid())"
        let missing = try Self.herald(["replay", "--database-url", TestPostgres.cluster().connectionString(database: missingName)])
        #expect(missing.status == 2, "\(missing)")
        #expect(missing.stderr.contains("“\(missingName)” does not exist") && missing.stderr.contains("createdb \(missingName)")
                && !missing.stderr.contains("unreachable") && !missing.stderr.contains("retries"), "\(missing)")

        // `serve` at start-up alike: it exits, so it must not promise to retry either.
        let serve = try Self.herald(["serve", "--database-url", TestPostgres.cluster().connectionString(database: missingName),
                                     "--listen", "127.0.0.1:\(LocalClusterPort.free())"])
        #expect(serve.status == 2 && serve.stderr.contains("“\(missingName)” does not exist") && !serve.stderr.contains("retries"), "\(serve)")

        // A database without Herald's tables (42P01): run herald migrate, or check the name.
        let empty = try TestPostgres.freshDatabase(migrated: false)
        for arguments in [["state", "alice"], ["replay"], ["explain", "com.example.mail", "m1"], ["export"]] {
            let r = try Self.herald(arguments + ["--database-url", empty])
            #expect(r.status == 2, "\(arguments): \(r)")
            #expect(r.stderr.contains("no Herald schema") && r.stderr.contains("herald migrate"), "\(arguments): \(r)")
        }
    }
}
