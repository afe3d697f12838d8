// SPEC §10 engine parts: fan-out, deterministic replay, timers as outputs.
import HeraldCore
import Testing

@Suite struct FanOutAndDeterminismTests {

    @Test func fanOut_oneEventPerUser_eachJudgedOnItsOwn() {
        var h = EngineHarness()
        h.authorize("u1", "com.example.mail")
        h.authorize("u3", "com.example.mail")
        h.send("focusOn", #"{"user":"u3","focus":"Work"}"#)
        let a = Engine().admit(op: "submit", request: try! JSONValue.parse(
            #"{"id":"n1","app":"com.example.mail","users":["u1","u2","u3"],"title":"Hi"}"#), apps: h.apps)
        guard case .accepted(let acc) = a else { Issue.record("rejected"); return }
        #expect(acc.events.map(\.user) == ["u1", "u2", "u3"])
        #expect(acc.events.map { $0.body["user"] } == [.string("u1"), .string("u2"), .string("u3")])
        #expect(acc.events.allSatisfy { $0.body["users"] == nil })
        let ds = h.send("submit", #"{"id":"n1","app":"com.example.mail","users":["u1","u2","u3"],"title":"Hi"}"#)
        #expect(ds.map(\.kind) == [.alert, .suppressed, .held])
        #expect(ds.map(\.user) == ["u1", "u2", "u3"])
    }

    @Test func replay_sameEventsGiveIdenticalBytes() {
        var h = EngineHarness.mailAndChatAuthorized()
        h.send("settings", #"{"user":"u","app":"com.example.mail","delivery":"summary"}"#)
        h.submit("n1", #""relevanceScore":0.5,"data":{"z":1,"a":[1,2.5,"x"]}"#)
        h.submit("n2", app: "com.example.chat", #""interruptionLevel":"timeSensitive""#)
        h.advance(to: at("2026-01-06T09:00:00Z"))
        var replay = EngineHarness()
        for e in h.events { _ = replay.apply(e) }
        replay.advance(to: at("2026-01-06T09:00:00Z"))
        #expect(replay.log.map(\.body.canonicalBytes) == h.log.map(\.body.canonicalBytes))
        #expect(replay.log.map(\.traceJSON) == h.log.map(\.traceJSON))
        #expect(replay.state() == h.state())
    }

    @Test func timers_spuriousWakeIsHarmless() {
        var h = EngineHarness.mailAndChatAuthorized()
        h.submit("n1", #""deliverAt":"2026-01-05T13:00:00Z""#)
        #expect(h.advance(to: at("2026-01-05T12:30:00Z")).isEmpty)
        #expect(h.advance(to: at("2026-01-05T12:30:00Z")).isEmpty)
        #expect(only(h.advance(to: at("2026-01-05T13:00:00Z"))).kind == .alert)
        #expect(h.advance(to: at("2026-01-05T13:00:00Z")).isEmpty)
    }

    @Test func timers_nextWakeIsEarliestDeadline() {
        var h = EngineHarness.mailAndChatAuthorized()
        var s = h.state()
        let o = h.engine.apply(StoredEvent(seq: 99, user: "u", type: "submit",
                                           body: try! JSONValue.parse(#"{"id":"x","app":"com.example.mail","user":"u","deliverAt":"2026-01-05T15:00:00Z"}"#),
                                           at: T0), to: &s, apps: &h.apps)
        #expect(o.deliveries.isEmpty && o.nextWake == at("2026-01-05T15:00:00Z"))
    }

    @Test func idleUser_defaultStateIsSmall() {
        #expect(MemoryLayout<UserState>.size < 256)
    }
}
