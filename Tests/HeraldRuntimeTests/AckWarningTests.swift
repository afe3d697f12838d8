// The warnings of an ack over real TCP and PostgreSQL: their shape, and what each is judged from.
import Foundation
import HeraldCore
import HeraldRuntime
import HeraldTestSupport
import Testing

@Suite struct AckWarningTests {
    static let mail = "com.example.mail"

    /// A warning is shaped like an error (`code`, `title`, `detail`, nothing else), so a client
    /// shows both the same way; `title` names the value concerned, `detail` says what to change.
    @Test func everyWarningCarriesCodeTitleAndDetailLikeAnError() throws {
        let server = try TestServer(start: "2026-03-27T07:00:00Z")
        defer { server.stop() }
        let c = try server.client()
        #expect(try c.call(["op": "registerApp", "app": .string(Self.mail), "entitlements": []])["ok"] == true)
        let ack = try c.call(["op": "submit", "id": "n1", "app": .string(Self.mail), "user": "alice", "title": "Shipped.",
                              "body": "B", "actions": [["id": "o", "title": "Open"]], "communication": ["sender": "bob"],
                              "colour": "red"])
        #expect(ack["ok"] == true, "\(ack.canonicalString)")
        let warnings = ack["warnings"]?.arrayValue ?? []
        #expect(Set(warnings.compactMap { $0["code"]?.stringValue }) == [
            "title_ends_with_punctuation", "action_opens_app_only", "communication_not_entitled",
            "missing_hidden_previews_placeholder", "unknown_field"], "\(ack.canonicalString)")
        for w in warnings {
            #expect(w.objectValue.map { Set($0.keys) } == ["code", "title", "detail"], "\(w.canonicalString)")
            #expect(w["title"]?.stringValue?.isEmpty == false && w["detail"]?.stringValue?.isEmpty == false, "\(w.canonicalString)")
        }
        let title = warnings.first { $0["code"] == "title_ends_with_punctuation" }
        #expect(title?["title"] == "The title “Shipped.” ends in “.”", "\(title?.canonicalString ?? "none")")
        let unknown = warnings.first { $0["code"] == "unknown_field" }
        #expect(unknown?["title"] == "Field “colour” is not part of submit", "\(unknown?.canonicalString ?? "none")")
        #expect(unknown?["detail"]?.stringValue?.hasPrefix("It was ignored (not stored).") == true)
        // The settings ops' warnings too.
        let settings = try c.call(["op": "settings", "user": "alice"])
        #expect(settings["warnings"]?.arrayValue?.map { $0.objectValue.map { Set($0.keys) } } == [["code", "title", "detail"]],
                "\(settings.canonicalString)")
    }

    /// A submit for an app no `registerApp` named used to be acknowledged without a word, and
    /// only consumers saw its `suppressed`. It is stored and judged exactly as before, and its
    /// ack says `app_not_registered`; a registered app's submits (one pipelined right behind its
    /// `registerApp` included) and a fan-out are judged the same way, re-sends are not warned again.
    @Test func aSubmitForAnAppNeverRegisteredIsStoredJudgedAsBeforeAndWarned() throws {
        let server = try TestServer(start: "2026-03-27T07:00:00Z")
        defer { server.stop() }
        let c = try server.client()
        func codes(_ r: JSONValue) -> [String] { (r["warnings"]?.arrayValue ?? []).compactMap { $0["code"]?.stringValue } }
        func submit(_ id: String, app: String, users: [JSONValue]? = nil) -> JSONValue {
            var o: [String: JSONValue] = ["op": "submit", "id": .string(id), "app": .string(app), "user": "alice",
                                          "title": "T", "body": "B", "hiddenPreviewsBodyPlaceholder": "x"]
            if let users { o["user"] = nil; o["users"] = .array(users) }
            return .object(o)
        }
        let typo = "com.example.mial"
        let unregistered = try c.call(submit("n1", app: typo))
        #expect(unregistered["ok"] == true && codes(unregistered) == ["app_not_registered"], "\(unregistered.canonicalString)")
        let w = unregistered["warnings"]?.arrayValue?.first
        #expect(w?["title"] == "com.example.mial was never registered", "\(w?.canonicalString ?? "none")")
        #expect(w?["detail"]?.stringValue?.contains("registerApp") == true)
        let fan = try c.call(submit("n2", app: typo, users: ["alice", "bob"]))
        #expect(fan["appended"] == 2 && codes(fan) == ["app_not_registered"], "\(fan.canonicalString)")
        let again = try c.call(submit("n1", app: typo))
        #expect(again["duplicate"] == true && codes(again) == [], "a re-send is answered as before: \(again.canonicalString)")

        // Pipelined behind its registerApp: judged after it, so not warned.
        try c.send(#"{"op":"registerApp","app":"com.example.mail","entitlements":[],"rid":1}"#)
        try c.send(#"{"op":"submit","id":"n3","app":"com.example.mail","user":"alice","title":"T","body":"B","hiddenPreviewsBodyPlaceholder":"x","rid":2}"#)
        let registered = try c.readJSON(), pipelined = try c.readJSON()
        #expect(registered["rid"] == 1 && registered["ok"] == true)
        #expect(pipelined["rid"] == 2 && pipelined["ok"] == true && codes(pipelined) == [], "\(pipelined.canonicalString)")
        let fanRegistered = try c.call(submit("n4", app: Self.mail, users: ["alice", "bob"]))
        #expect(fanRegistered["appended"] == 2 && codes(fanRegistered) == [], "\(fanRegistered.canonicalString)")
        let withdraw = try c.call(["op": "withdraw", "app": .string(typo), "id": "n1"])
        #expect(withdraw["ok"] == true && codes(withdraw) == [], "only submits are warned: \(withdraw.canonicalString)")

        // Stored and judged as before: alice never authorized either app, so both are suppressed.
        let consumer = try server.client()
        _ = try consumer.call(["op": "subscribe", "consumer": "c", "from": "earliest"])
        let ds = try consumer.deliveries(3)
        #expect(ds.map { $0["kind"]?.stringValue } == ["suppressed", "suppressed", "suppressed"], "\(ds.map(\.canonicalString))")
        #expect(ds.map { $0["app"]?.stringValue } == [typo, typo, typo])
    }
}
