// Seeded random streams over many users: one terminal outcome each, identical bytes on replay, restart equivalence.
import HeraldCore
import HeraldTestSupport
import Testing

/// Random wire requests over a few apps and many users, with the clock moving forward.
struct RandomWorkload {
    var rng: SeededRandom
    let users: [String]
    let apps = ["com.example.mail", "com.example.chat", "com.example.news", "gov.alerts", "com.example.pager"]
    var nextId = 0
    var now: Instant

    init(seed: UInt64, users: Int, start: Instant = T0) {
        rng = SeededRandom(seed: seed)
        self.users = (0..<users).map { "user\($0)" }
        now = start
    }

    mutating func pick<T>(_ xs: [T]) -> T { xs[Int(rng.next() % UInt64(xs.count))] }
    mutating func chance(_ percent: UInt64) -> Bool { rng.next() % 100 < percent }
    mutating func minutes(_ max: Int64) -> Instant.Duration { .minutes(Int64(rng.next() % UInt64(max))) }
    func ts(_ t: Instant) -> String { "\"\(t.rfc3339)\"" }

    /// The setup requests: app registrations.
    func setup() -> [(String, String)] {
        [("registerApp", #"{"app":"com.example.chat","entitlements":["communication"]}"#),
         ("registerApp", #"{"app":"gov.alerts","entitlements":["government"]}"#),
         ("registerApp", #"{"app":"com.example.pager","entitlements":["critical"]}"#)]
    }

    /// The next request (op, JSON), after moving the clock forward a little.
    mutating func next() -> (String, String) {
        now = now.adding(.init(milliseconds: Int64(rng.next() % 120_000)))
        let u = pick(users), a = pick(apps)
        let r = rng.next() % 100
        switch r {
        case 0..<55:
            nextId += 1
            var extra: [String] = []
            let level = a == "com.example.pager" && chance(30) ? "critical" : pick(["passive", "active", "active", "active", "timeSensitive"])
            extra.append(#""interruptionLevel":"\#(level)""#)
            if chance(20) { extra.append(#""collapseId":"c\#(rng.next() % 3)""#) }
            if chance(15) { extra.append(#""deliverAt":\#(ts(now.adding(minutes(300))))"#) }
            if chance(20) { extra.append(#""expiresAt":\#(ts(now.adding(minutes(600)).adding(.hours(5))))"#) }
            if chance(30) { extra.append(#""relevanceScore":\#(Double(rng.next() % 11) / 10)"#) }
            if a == "com.example.chat" && chance(60) { extra.append(#""communication":{"sender":"\#(pick(["alice", "bob", "carol"]))"}"#) }
            if level != "critical" && level != "timeSensitive" && chance(5) { extra.append(#""marketing":true"#) }
            let who = chance(5) ? #""users":["\#(pick(users))","\#(pick(users))","\#(pick(users))"]"# : #""user":"\#(u)""#
            return ("submit", #"{"id":"n\#(nextId)","app":"\#(a)",\#(who),"title":"T\#(nextId)","body":"B",\#(extra.joined(separator: ","))}"#)
        case 55..<63:
            let status = pick(["authorized", "authorized", "authorized", "provisional", "denied", "notDetermined"])
            let opts = ["alert", "sound", "badge", "criticalAlert"].filter { _ in chance(70) }.map { "\"\($0)\"" }.joined(separator: ",")
            return ("authorization", #"{"user":"\#(u)","app":"\#(a)","status":"\#(status)","options":[\#(opts)]}"#)
        case 63..<68:
            if chance(50) {
                return ("settings", #"{"user":"\#(u)","app":"\#(a)","delivery":"\#(pick(["immediate", "summary"]))","timeSensitive":\#(chance(70)),"marketingConsent":\#(chance(50))}"#)
            }
            let budget = chance(30) ? "\(rng.next() % 5)" : "null"
            return ("settings", #"{"user":"\#(u)","allowNotifications":\#(chance(85)),"showPreviews":"\#(pick(["always", "whenUnlocked", "never"]))","attentionBudget":\#(budget)}"#)
        case 68..<71:
            if chance(30) { return ("provisionalTurnOff", #"{"user":"\#(u)","app":"\#(a)"}"#) }
            return ("provisionalKeep", #"{"user":"\#(u)","app":"\#(a)","delivery":"\#(pick(["immediate", "summary"]))"}"#)
        case 71..<73:
            let zone = pick(["UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata"])
            return ("summarySchedule", #"{"user":"\#(u)","times":["0\#(rng.next() % 10):\#(pick(["00", "30"]))","1\#(rng.next() % 10):15"],"timeZone":"\#(zone)"}"#)
        case 73..<76:
            return ("focusDefine", #"{"user":"\#(u)","focus":"\#(pick(["Sleep", "Work"]))","allowedPeople":["alice"],"allowedApps":["\#(pick(apps))"],"allowTimeSensitive":\#(chance(50)),"schedule":[{"days":[1,2,3,4,5,6,7],"start":"\#(pick(["22:00", "09:00", "13:30"]))","end":"\#(pick(["07:00", "17:00", "14:00"]))"}],"timeZone":"\#(pick(["UTC", "Europe/Berlin"]))"}"#)
        case 76..<81:
            let until = chance(50) ? #","until":\#(ts(now.adding(minutes(180))))"# : ""
            return ("focusOn", #"{"user":"\#(u)","focus":"\#(pick(["Sleep", "Work", "Gym"]))"\#(until)}"#)
        case 81..<85:
            return ("focusOff", #"{"user":"\#(u)","focus":"\#(pick(["Sleep", "Work", "Gym"]))"}"#)
        case 85..<87:
            return ("mute", #"{"user":"\#(u)","app":"\#(a)","until":\#(ts(now.adding(minutes(120))))}"#)
        case 87..<90:
            return ("snooze", #"{"user":"\#(u)","app":"\#(a)","id":"n\#(max(1, nextId - Int(rng.next() % 20)))","until":\#(ts(now.adding(minutes(90))))}"#)
        case 90..<94:
            return ("opened", #"{"user":"\#(u)","app":"\#(a)","id":"n\#(max(1, nextId - Int(rng.next() % 20)))"}"#)
        case 94..<96:
            return ("badgeClear", #"{"user":"\#(u)","app":"\#(a)"}"#)
        default:
            return ("withdraw", #"{"user":"\#(u)","app":"\#(a)","id":"n\#(max(1, nextId + 2 - Int(rng.next() % 20)))"}"#)
        }
    }
}

@Suite struct EnginePropertyTests {
    /// Runs a random workload; the runtime-like driver wakes each user at its nextWake.
    func run(seed: UInt64, events: Int, users: Int) -> EngineHarness {
        var w = RandomWorkload(seed: seed, users: users)
        var h = EngineHarness(now: w.now)
        for (op, json) in w.setup() { h.send(op, json) }
        var wakes: [String: Instant] = [:]
        for _ in 0..<events {
            let (op, json) = w.next()
            // The timing wheel: wake users whose deadline passed, before the next request.
            for u in wakes.keys.sorted() where wakes[u]! <= w.now {
                var s = h.states[u]!
                let o = h.engine.advance(&s, to: w.now, apps: h.apps)
                h.log += o.deliveries
                h.states[u] = s
                wakes[u] = o.nextWake
            }
            h.now = w.now
            guard case .accepted = h.engine.admit(op: op, request: try! JSONValue.parse(json), apps: h.apps, now: h.now) else { continue }
            h.send(op, json)
            for u in h.states.keys { wakes[u] = h.states[u]!.nextDeadline() }
        }
        return h
    }

    /// Ends every Focus and lets a month pass, so every pending decision resolves.
    func drain(_ h: inout EngineHarness) {
        h.now = h.now.adding(.minutes(1))
        for u in h.states.keys.sorted() {
            for f in ["Sleep", "Work", "Gym"] { h.send("focusOff", #"{"user":"\#(u)","focus":"\#(f)"}"#) }
        }
        // Scheduled windows come back, and hold again: advance in steps, turning them off.
        _ = h.advance(by: .days(40))
        for u in h.states.keys.sorted() {
            for f in ["Sleep", "Work", "Gym"] { h.send("focusOff", #"{"user":"\#(u)","focus":"\#(f)"}"#) }
        }
    }

    @Test(arguments: [UInt64(1), 2, 3])
    func property_everySubmittedNotificationEndsInExactlyOneTerminalOutcome(seed: UInt64) {
        var h = run(seed: seed, events: 4000, users: 40)
        drain(&h)
        // Accepted submits per (user, app, id).
        var submitted = Set<String>()
        var snoozed = Set<String>()
        for e in h.events where e.type == "submit" {
            submitted.insert("\(e.user!)|\(e.body["app"]!.stringValue!)|\(e.body["id"]!.stringValue!)")
        }
        for e in h.events where e.type == "snooze" {
            snoozed.insert("\(e.user!)|\(e.body["app"]!.stringValue!)|\(e.body["id"]!.stringValue!)")
        }
        var terminal: [String: Int] = [:]
        for d in h.log {
            switch d.kind {
            case .alert, .quiet, .suppressed, .expired, .replaced:
                if !d.snoozed { terminal["\(d.user)|\(d.app!)|\(d.notificationId!)", default: 0] += 1 }
            case .withdrawn where d.reason != "withdrawn_after_delivery":
                terminal["\(d.user)|\(d.app!)|\(d.notificationId!)", default: 0] += 1
            case .summary, .focusDigest:
                for i in d.items { terminal["\(d.user)|\(i.notification.app)|\(i.notification.id)", default: 0] += 1 }
            default:
                break
            }
        }
        #expect(submitted.count > 1000)
        var bad: [String] = []
        for key in submitted.sorted() {
            let n = terminal[key] ?? 0
            if n == 1 || (n >= 1 && snoozed.contains(key)) { continue }
            bad.append("\(key): \(n)")
        }
        #expect(bad.isEmpty, "seed \(seed): \(bad.prefix(10))")
        for s in h.states.values { #expect(s.pendingCount == 0, "seed \(seed): \(s.user) still has \(s.pendingList)") }
    }

    @Test(arguments: [UInt64(7), 8])
    func property_sameStreamTwice_identicalBytes_andStateReproducedByFold(seed: UInt64) {
        let h = run(seed: seed, events: 3000, users: 30)
        // Replay the stored events (through their canonical bytes, as the store keeps them),
        // with no intermediate wakes at all: the user's own event order fires the timers.
        var r = EngineHarness(now: T0)
        for e in h.events {
            let body = try! JSONValue.parse(e.body.canonicalBytes)
            _ = r.apply(StoredEvent(seq: e.seq, user: e.user, type: e.type, body: body, at: e.at))
        }
        var h2 = h
        h2.advance(to: h.now.adding(.days(3)))
        r.advance(to: h.now.adding(.days(3)))
        func perUser(_ log: [Delivery]) -> [String: [[UInt8]]] {
            var m: [String: [[UInt8]]] = [:]
            for d in log { m[d.user, default: []].append(d.body.canonicalBytes + d.traceJSON.canonicalBytes) }
            return m
        }
        #expect(perUser(r.log) == perUser(h2.log))
        // The direct writer gives exactly the canonical bytes, for every kind of delivery.
        #expect(Set(h2.log.map(\.kind)).count >= 9)
        #expect(h2.log.allSatisfy { $0.bodyBytes == $0.body.canonicalBytes })
        #expect(r.states == h2.states)
    }

    @Test func property_restartEquivalence_prefixThenRest() {
        let h = run(seed: 11, events: 2000, users: 20)
        let cut = h.events.count / 3
        var whole = EngineHarness(now: T0)
        for e in h.events { _ = whole.apply(e) }
        var first = EngineHarness(now: T0)
        for e in h.events[..<cut] { _ = first.apply(e) }
        // "Restart": a new engine value and harness, with only the folded states and registry carried over.
        var resumed = EngineHarness(now: T0)
        resumed.states = first.states
        resumed.apps = first.apps
        for e in h.events[cut...] { _ = resumed.apply(e) }
        #expect(resumed.states == whole.states)
        #expect((first.log + resumed.log).map(\.body.canonicalBytes) == whole.log.map(\.body.canonicalBytes))
    }
}
