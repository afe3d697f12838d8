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
}
