// SPEC §4: every content-check error and warning at the door, with stable codes and clear texts.
import HeraldCore
import Testing

@Suite struct ContentCheckTests {
    let engine = Engine()

    func admit(_ json: String, op: String = "submit", apps: AppRegistry = AppRegistry(), now: Instant? = T0) -> Admission {
        // Every check here also runs through the fast door for plain submits: the same verdict when it reads the line.
        if op == "submit", json.hasPrefix("{\"") {
            var line = "{\"op\":\"submit\"," + json.dropFirst()
            #expect(line.withUTF8 { SubmitLine.agreesWithGeneralPath(UnsafeRawBufferPointer($0), engine: engine, apps: apps, now: now) })
        }
        return engine.admit(op: op, request: try! JSONValue.parse(json), apps: apps, now: now)
    }

    func rejection(_ json: String, op: String = "submit", apps: AppRegistry = AppRegistry(),
               sourceLocation: SourceLocation = #_sourceLocation) -> RequestError? {
        if case .rejected(let e) = admit(json, op: op, apps: apps) {
            #expect(!e.title.isEmpty && !e.detail.isEmpty && e.title != e.detail, sourceLocation: sourceLocation)
            return e
        }
        Issue.record("accepted: \(json)", sourceLocation: sourceLocation)
        return nil
    }

    func warnings(_ json: String, op: String = "submit", apps: AppRegistry = AppRegistry(), now: Instant? = T0,
                  sourceLocation: SourceLocation = #_sourceLocation) -> [String] {
        switch admit(json, op: op, apps: apps, now: now) {
        case .accepted(let a): return a.warnings.map(\.code)
        case .rejected(let e): Issue.record("rejected: \(e.code) \(e.title)", sourceLocation: sourceLocation); return []
        }
    }

    static let base = #""id":"n1","app":"com.example.mail","user":"u","hiddenPreviewsBodyPlaceholder":"New mail""#

    func submit(_ extra: String) -> String { "{\(Self.base)\(extra.isEmpty ? "" : ",")\(extra)}" }

    // Errors.

    @Test func check_error_moreThanFourActions() {
        let acts = (1...5).map { #"{"id":"a\#($0)","title":"Do \#($0)"}"# }.joined(separator: ",")
        let e = rejection(submit(#""actions":[\#(acts)]"#))
        #expect(e?.code == "too_many_actions")
        #expect(e?.title == "Notification has 5 actions")
    }

    @Test func check_fourActionsAccepted() {
        let acts = (1...4).map { #"{"id":"a\#($0)","title":"Do \#($0)"}"# }.joined(separator: ",")
        #expect(warnings(submit(#""actions":[\#(acts)]"#)) == [])
    }

    @Test func check_error_actionWithoutTitle() {
        #expect(rejection(submit(#""actions":[{"id":"a"}]"#))?.code == "action_without_title")
        #expect(rejection(submit(#""actions":[{"id":"a","title":"  "}]"#))?.code == "action_without_title")
    }

    @Test func check_error_relevanceScoreOutsideZeroToOne() {
        #expect(rejection(submit(#""relevanceScore":1.5"#))?.code == "relevance_score_out_of_range")
        #expect(rejection(submit(#""relevanceScore":-0.1"#))?.code == "relevance_score_out_of_range")
        #expect(warnings(submit(#""relevanceScore":1"#)) == [])
        #expect(warnings(submit(#""relevanceScore":0"#)) == [])
    }

    @Test func check_error_marketingWithTimeSensitiveOrCritical() {
        #expect(rejection(submit(#""marketing":true,"interruptionLevel":"timeSensitive""#))?.code == "marketing_not_urgent")
        var apps = AppRegistry()
        apps.register("com.example.mail", entitlements: .critical)
        #expect(rejection(submit(#""marketing":true,"interruptionLevel":"critical""#), apps: apps)?.code == "marketing_not_urgent")
    }

    @Test func check_error_criticalWithoutEntitlement() {
        let e = rejection(submit(#""interruptionLevel":"critical""#))
        #expect(e?.code == "critical_not_entitled")
        #expect(e?.title == "com.example.mail may not send Critical notifications")
    }

    @Test func check_error_expiresAtBeforeDeliverAt() {
        #expect(rejection(submit(#""deliverAt":"2026-01-05T13:00:00Z","expiresAt":"2026-01-05T12:59:59Z""#))?.code == "expires_before_deliver")
    }

    @Test func check_error_fieldOfWrongType_namesFieldExpectedAndGot() {
        let e = rejection(submit(#""title":42"#))
        #expect(e?.code == "wrong_type")
        #expect(e?.title == "Field “title” of submit is an integer, not a string")
        #expect(rejection(submit(#""marketing":"yes""#))?.title == "Field “marketing” of submit is a string, not a boolean (true or false)")
        #expect(rejection(submit(#""actions":{}"#))?.title == "Field “actions” of submit is an object, not an array")
        #expect(rejection(submit(#""relevanceScore":"high""#))?.code == "wrong_type")
        #expect(rejection(submit(#""data":[1]"#))?.code == "wrong_type")
        #expect(rejection(#"{"user":"u","app":"a","alert":1}"#, op: "settings")?.code == "wrong_type")
        #expect(rejection(#"{"user":"u","attentionBudget":2.5}"#, op: "settings")?.code == "wrong_type")
    }

    /// A required field of the wrong type is not "optional": the detail does not offer to leave it
    /// out (leaving it out is `missing_field`); an optional one's does.
    @Test func check_error_wrongTypeDetailSaysWhetherTheFieldMayBeLeftOut() {
        for json in [#"{"id":"n1","app":5,"user":"u"}"#, #"{"id":5,"app":"a","user":"u"}"#] {
            let e = rejection(json)
            #expect(e?.code == "wrong_type" && e?.detail.contains("leave it out") == false, "\(e?.detail ?? "accepted")")
        }
        #expect(rejection(#"{"user":5,"app":"a"}"#, op: "badgeClear")?.detail.contains("badgeClear needs it") == true)
        #expect(rejection(submit(#""threadId":5"#))?.detail.hasSuffix("or leave it out.") == true)
    }

    @Test func check_error_unknownInterruptionLevel() {
        let e = rejection(submit(#""interruptionLevel":"urgent""#))
        #expect(e?.code == "unknown_interruption_level")
        #expect(e?.title == "Unknown interruption level “urgent”")
    }

    @Test func check_error_bodyOver4KiB() {
        let big = String(repeating: "x", count: 4100)
        #expect(rejection(submit(#""body":"\#(big)""#))?.code == "payload_too_large")
        let fits = String(repeating: "x", count: 3900)
        #expect(warnings(submit(#""body":"\#(fits)""#)) == [])
    }

    @Test func check_error_invalidTimestamp() {
        #expect(rejection(submit(#""deliverAt":"tomorrow""#))?.code == "invalid_timestamp")
    }

    @Test func check_error_missingFields() {
        #expect(rejection(#"{"app":"a","user":"u"}"#)?.code == "missing_field")
        #expect(rejection(#"{"id":"n","user":"u"}"#)?.code == "missing_field")
        #expect(rejection(#"{"id":"n","app":"a"}"#)?.code == "missing_field")
        #expect(rejection(#"{"id":"","app":"a","user":"u"}"#)?.code == "invalid_value")
    }

    @Test func check_error_userAndUsers() {
        #expect(rejection(#"{"id":"n","app":"a","user":"u","users":["v"]}"#)?.code == "user_and_users")
        #expect(rejection(#"{"id":"n","app":"a","users":[]}"#)?.code == "empty_users")
    }

    @Test func check_error_fanOutOver10000Users() {
        let users = (0...10_000).map { "\"u\($0)\"" }.joined(separator: ",")
        #expect(rejection(#"{"id":"n","app":"a","users":[\#(users)]}"#)?.code == "too_many_users")
        let ok = (1...10_000).map { "\"u\($0)\"" }.joined(separator: ",")
        guard case .accepted(let a) = admit(#"{"id":"n","app":"a","users":[\#(ok)],"hiddenPreviewsBodyPlaceholder":"x"}"#) else {
            Issue.record("rejected"); return
        }
        #expect(a.events.count == 10_000)
    }

    @Test func check_error_unknownOp() {
        #expect(rejection(#"{}"#, op: "subscribe")?.code == "unknown_op")
    }

    /// A value of any size shows at most `errorTextEchoLimit` scalars of itself in a title or
    /// warning (hostile-input.md: a 60 KB op made a 60 KB title), and a short one shows whole.
    @Test func check_errorTexts_clipEchoedValues() {
        let long = String(repeating: "x", count: 20_000)
        let shown = "“" + String(repeating: "x", count: 60) + "…”"
        let op = engine.admit(op: long, request: .object([:]), apps: AppRegistry())
        guard case .rejected(let unknownOp) = op else { Issue.record("accepted"); return }
        #expect(unknownOp.title == "Unknown op \(shown)")
        #expect(RequestError.unknownOp(long).title == "Unknown op \(shown)")
        #expect(rejection(submit(#""deliverAt":"\#(long)""#))?.title.hasSuffix(shown) == true)
        #expect(rejection(submit(#""interruptionLevel":"\#(long)""#))?.title == "Unknown interruption level \(shown)")
        guard case .accepted(let settings) = admit(#"{"user":"u","\#(long)":"x"}"#, op: "settings") else { Issue.record("rejected"); return }
        #expect(settings.warnings.contains { $0.title == "Field \(shown) is not part of settings" && $0.detail.hasPrefix("It was ignored (not stored).") })
        guard case .accepted(let a) = admit(submit(#""\#(long)":1"#)) else { Issue.record("rejected"); return }
        #expect(a.warnings.map(\.title) == ["Field \(shown) is not part of submit"])
        #expect(a.warnings.allSatisfy { $0.detail.hasPrefix("It was ignored (not stored).") })
        #expect(RequestError.appNotOwned(long).title == "This token may not act for app \(shown)")
        // One character of a letter and 10,000 combining marks is clipped too (by scalars).
        let marks = "e" + String(repeating: "\u{301}", count: 10_000)
        #expect(clipped(marks).unicodeScalars.count == 61)
        #expect(clipped("Order shipped") == "Order shipped")
        #expect(rejection(#"{"user":"u","app":"a","status":"maybe"}"#, op: "authorization")?.title == "“maybe” is not a valid status")
    }

    /// Identifiers are NFC (docs/hostile-input.md): Swift compares them by canonical equivalence,
    /// PostgreSQL by bytes, and only NFC spellings make the two agree.
    @Test func check_error_identifiersNotNFC() {
        let nfd = "Jose\u{301}", nfc = "Jos\u{E9}"
        #expect(nfd == nfc && Array(nfd.utf8) != Array(nfc.utf8))  // one key in memory, two in PostgreSQL
        let user = rejection(#"{"id":"n1","app":"com.example.mail","user":"\#(nfd)","hiddenPreviewsBodyPlaceholder":"x"}"#)
        #expect(user?.code == "identifier_not_nfc")
        #expect(user?.title == "“user” of submit is not in Unicode Normalization Form C (from byte 3 on)")
        #expect(user?.detail.contains("normalize(\"NFC\"") == true)
        #expect(rejection(#"{"id":"n1","app":"com.example.\#(nfd)","user":"u"}"#)?.code == "identifier_not_nfc")
        #expect(rejection(#"{"id":"\#(nfd)","app":"com.example.mail","user":"u"}"#)?.code == "identifier_not_nfc")
        #expect(rejection(#"{"id":"n1","app":"com.example.mail","users":["u","\#(nfd)"]}"#)?.title
                == "“users[]” of submit is not in Unicode Normalization Form C (from byte 3 on)")
        #expect(rejection(#"{"app":"a","id":"n1","user":"\#(nfd)"}"#, op: "withdraw")?.code == "identifier_not_nfc")
        #expect(rejection(#"{"user":"u","app":"\#(nfd)","alert":true}"#, op: "settings")?.code == "identifier_not_nfc")
        #expect(rejection(#"{"user":"u","focus":"\#(nfd)"}"#, op: "focusOn")?.code == "identifier_not_nfc")
        #expect(rejection(#"{"user":"u","app":"a","id":"\#(nfd)"}"#, op: "opened")?.code == "identifier_not_nfc")
        // The NFC spelling of the same names is accepted, by the fast door too (`admit` compares).
        #expect(warnings(#"{"id":"\#(nfc)","app":"com.example.\#(nfc)","user":"\#(nfc)","hiddenPreviewsBodyPlaceholder":"x"}"#) == [])
        #expect(warnings(#"{"id":"n1","app":"com.example.mail","users":["u","\#(nfc)"],"hiddenPreviewsBodyPlaceholder":"x"}"#) == [])
        // Texts that are not identifiers keep any spelling.
        #expect(warnings(submit(#""title":"Caf\#("e\u{301}")","body":"\#(nfd)""#)) == [])
    }

    @Test func check_error_settingsScope() {
        #expect(rejection(#"{"user":"u","app":"a","showPreviews":"never"}"#, op: "settings")?.code == "global_setting_with_app")
        #expect(rejection(#"{"user":"u","alert":true}"#, op: "settings")?.code == "app_setting_without_app")
        #expect(rejection(#"{"user":"u","showPreviews":"sometimes"}"#, op: "settings")?.code == "invalid_value")
    }

    @Test func check_error_authorizationValues() {
        #expect(rejection(#"{"user":"u","app":"a","status":"maybe"}"#, op: "authorization")?.code == "invalid_value")
        #expect(rejection(#"{"user":"u","app":"a","status":"authorized","options":["vibrate"]}"#, op: "authorization")?.code == "invalid_value")
    }

    @Test func check_error_scheduleValues() {
        #expect(rejection(#"{"user":"u","times":["25:00"],"timeZone":"UTC"}"#, op: "summarySchedule")?.code == "invalid_local_time")
        #expect(rejection(#"{"user":"u","times":[],"timeZone":"UTC"}"#, op: "summarySchedule")?.code == "invalid_summary_times")
        #expect(rejection(#"{"user":"u","times":["08:00"],"timeZone":"Mars/Olympus"}"#, op: "summarySchedule") != nil)
        #expect(rejection(#"{"user":"u","focus":"Sleep","schedule":[{"days":[8],"start":"22:00","end":"07:00"}],"timeZone":"UTC"}"#, op: "focusDefine")?.code == "invalid_weekday")
    }

    @Test func check_nulByteRejectedByParser() {
        #expect(throws: JSONParseError.self) { try JSONValue.parse("{\"id\":\"a\\u0000b\"}") }
    }

    // Warnings.

    @Test func check_warning_titleEndingInPunctuation() {
        #expect(warnings(submit(#""title":"Your order shipped!""#)) == ["title_ends_with_punctuation"])
        #expect(warnings(submit(#""title":"Your order shipped""#)) == [])
        // Endings past the ASCII fast path (`mayEndInPunctuation`) get the full check.
        for (title, warned) in [("Done. ", true), ("Wait?\n", true), ("Soon…", true), ("Soon… ", true), ("Ok ", false),
                                ("Café", false), ("x\u{301}", false), ("Really:", true), ("a,", true), ("a;", true), ("", false),
                                // Escapes at the end: the bytes end in an escape, the text in what it stands for.
                                ("Go!\t", true), ("Say \"hi\"", false), ("Say \"hi!\"", false), ("a\\", false), ("Why?\"", false)] {
            let json = JSONValue.object(["title": .string(title)]).canonicalString.dropFirst().dropLast()
            #expect(warnings(submit(String(json))) == (warned ? ["title_ends_with_punctuation"] : []), "\(title)")
        }
    }

    @Test func check_warning_actionThatOnlyOpensTheApp() {
        #expect(warnings(submit(#""actions":[{"id":"o","title":"Open"}]"#)) == ["action_opens_app_only"])
        #expect(warnings(submit(#""actions":[{"id":"r","title":"Reply"}]"#)) == [])
    }

    @Test func check_warning_actionTitleLongerThan20() {
        #expect(warnings(submit(#""actions":[{"id":"r","title":"Reply to everyone now"}]"#)) == ["action_title_too_long"])
        #expect(warnings(submit(#""actions":[{"id":"r","title":"Reply to everyone no"}]"#)) == [])
    }

    @Test func check_warning_actionTitleContainingAppName() {
        #expect(warnings(submit(#""actions":[{"id":"r","title":"Archive in Mail"}]"#)) == ["action_title_contains_app_name"])
    }

    @Test func check_warning_noHiddenPreviewsPlaceholder() {
        #expect(warnings(#"{"id":"n","app":"a","user":"u"}"#) == ["missing_hidden_previews_placeholder"])
    }

    /// SPEC §3 Hidden previews: "Notification" when the app gave none; a blank placeholder would
    /// show an empty notification, so the ack says so (the request is stored as sent).
    @Test func check_warning_blankHiddenPreviewsPlaceholder() {
        #expect(warnings(#"{"id":"n","app":"a","user":"u","hiddenPreviewsBodyPlaceholder":""}"#) == ["blank_hidden_previews_placeholder"])
        #expect(warnings(#"{"id":"n","app":"a","user":"u","hiddenPreviewsBodyPlaceholder":" \u00a0\t"}"#) == ["blank_hidden_previews_placeholder"])
        #expect(warnings(#"{"id":"n","app":"a","user":"u","hiddenPreviewsBodyPlaceholder":"\u200b\ufeff\u200d"}"#) == ["blank_hidden_previews_placeholder"])
        #expect(warnings(#"{"id":"n","app":"a","user":"u","hiddenPreviewsBodyPlaceholder":" New message"}"#) == [])
        #expect(warnings(#"{"id":"n","app":"a","user":"u","hiddenPreviewsBodyPlaceholder":"\u200bNeu"}"#) == [])
        #expect(warnings(#"{"id":"n","app":"a","user":"u","hiddenPreviewsBodyPlaceholder":"Nouveau"}"#) == [])
    }

    /// A `focusOn` whose `until` has passed turns nothing on: the ack says so rather than silently
    /// ending a manual Focus (the usual cause is the sender's clock or zone).
    @Test func check_warning_focusOnUntilNotInTheFuture() {
        #expect(warnings(#"{"user":"u","focus":"Work","until":"2026-01-05T11:00:00Z"}"#, op: "focusOn") == ["until_not_in_future"])
        #expect(warnings(#"{"user":"u","focus":"Work","until":"2026-01-05T12:00:00Z"}"#, op: "focusOn") == ["until_not_in_future"])
        #expect(warnings(#"{"user":"u","focus":"Work","until":"2026-01-05T12:00:00.001Z"}"#, op: "focusOn") == [])
        #expect(warnings(#"{"user":"u","focus":"Work"}"#, op: "focusOn") == [])
    }

    /// A `snooze` whose `until` is not in the future is judged again at once: the ack says so,
    /// not silently. A `mute` with a past `until` is the documented way to unmute: no warning.
    @Test func check_warning_snoozeUntilNotInTheFuture() {
        #expect(warnings(#"{"user":"u","app":"a","id":"n","until":"2026-01-05T12:00:00Z"}"#, op: "snooze") == ["until_not_in_future"])
        #expect(warnings(#"{"user":"u","app":"a","id":"n","until":"2026-01-05T12:00:00.001Z"}"#, op: "snooze") == [])
        #expect(warnings(#"{"user":"u","app":"a","until":"2026-01-05T11:00:00Z"}"#, op: "mute") == [])
    }

    @Test func check_warning_timeSensitiveMoreThanAnHourAway() {
        #expect(warnings(submit(#""interruptionLevel":"timeSensitive","deliverAt":"2026-01-05T13:00:01Z""#)) == ["time_sensitive_far_off"])
        #expect(warnings(submit(#""interruptionLevel":"timeSensitive","relevantAt":"2026-01-05T14:00:00Z""#)) == ["time_sensitive_far_off"])
        #expect(warnings(submit(#""interruptionLevel":"timeSensitive","deliverAt":"2026-01-05T13:00:00Z""#)) == [])
        #expect(warnings(submit(#""interruptionLevel":"active","deliverAt":"2026-01-06T13:00:00Z""#)) == [])
    }

    /// An integer in `data` beyond 64 bits (an unquoted snowflake or order number) is read as a
    /// double and delivered without its last digits: the ack says so, naming the first member.
    /// Integers within 64 bits are kept exactly, and fractions are what they are: no word.
    @Test func check_warning_integerBeyond64BitsInData() {
        guard case .accepted(let a) = admit(submit(#""data":{"order":{"ids":[1,12345678901234567890]},"big":-9223372036854775809}"#))
        else { Issue.record("rejected"); return }
        #expect(a.warnings.map(\.code) == ["integer_beyond_64_bits"])
        #expect(a.warnings[0].title.contains("“data.big” (and 1 more member like it) is a whole number"), "\(a.warnings[0].title)")
        #expect(a.events[0].body["data"]?["order"]?["ids"]?.arrayValue?[1] == .double(Double("12345678901234567890")!), "stored as the double it became")
        #expect(warnings(submit(#""data":{"id":9223372036854775807,"low":-9223372036854775808,"x":0.5,"y":1e300}"#)) == ["integer_beyond_64_bits"],
                "1e300 is an integral double beyond 64 bits too")
        #expect(warnings(submit(#""data":{"id":9223372036854775807,"low":-9223372036854775808,"x":0.5,"y":"12345678901234567890"}"#)) == [])
    }

    @Test func check_warning_unknownFieldIgnoredNotStored() {
        guard case .accepted(let a) = admit(submit(#""interuptionLevel":"passive""#)) else { Issue.record("rejected"); return }
        #expect(a.warnings.map(\.code) == ["unknown_field"])
        #expect(a.warnings[0].title.contains("interuptionLevel"))
        #expect(a.events[0].body["interuptionLevel"] == nil)
    }

    /// A typo inside an action, the communication object or a Focus schedule window is warned
    /// about as a top-level one is (it would otherwise silently change nothing: a misspelt
    /// `destructive` made the action non-destructive).
    @Test func check_warning_unknownNestedFieldNamedByItsPath() {
        guard case .accepted(let a) = admit(submit(#""actions":[{"id":"del","title":"Delete","destuctive":true}],"communication":{"sender":"a","grup":"g"}"#))
        else { Issue.record("rejected"); return }
        #expect(a.warnings.filter { $0.code == "unknown_field" }.map(\.title) == [
            "Field “actions[0].destuctive” is not part of an action",
            "Field “communication.grup” is not part of communication",
        ])
        #expect(a.warnings.filter { $0.code == "unknown_field" }.allSatisfy { $0.detail.hasPrefix("It was ignored (not stored).") })
        #expect(a.events[0].body["actions"]?.arrayValue?.first?["destuctive"] == nil)
        let focus = #"{"user":"u","focus":"Sleep","schedule":[{"days":[1],"start":"22:00","end":"07:00","zone":"UTC"}],"timeZone":"UTC"}"#
        #expect(warnings(focus, op: "focusDefine") == ["unknown_field"])
        guard case .accepted(let f) = admit(focus, op: "focusDefine") else { Issue.record("rejected"); return }
        #expect(f.warnings[0].title.contains("schedule[0].zone"))
    }

    @Test func check_warning_communicationWithoutEntitlement() {
        #expect(warnings(submit(#""communication":{"sender":"alice"}"#)) == ["communication_not_entitled"])
    }

    @Test func check_warning_duplicateUsers() {
        #expect(warnings(#"{"id":"n","app":"a","users":["u","v","u"],"hiddenPreviewsBodyPlaceholder":"x"}"#) == ["duplicate_users"])
    }

    // Normalization.

    @Test func check_normalizedBody_isCanonical() {
        guard case .accepted(let a) = admit(submit(#""deliverAt":"2026-01-05T14:00:00+01:00","rid":7,"token":"t""#)) else {
            Issue.record("rejected"); return
        }
        #expect(a.events[0].body.canonicalString ==
            #"{"app":"com.example.mail","deliverAt":"2026-01-05T13:00:00Z","hiddenPreviewsBodyPlaceholder":"New mail","id":"n1","interruptionLevel":"active","user":"u"}"#)
    }

    @Test func check_decodedNotificationEqualsParsedBody() {
        let json = submit(#""interruptionLevel":"timeSensitive","relevanceScore":1,"actions":[{"id":"r","title":"Reply","icon":"i"}],"communication":{"sender":"a","group":"g"},"deliverAt":"2026-01-05T14:00:00.5+01:00","expiresAt":"2026-01-05T15:00:00Z","data":{"k":[1,2]},"threadId":"t","collapseId":"c","sound":"s","subtitle":"x","marketing":false"#)
        guard case .accepted(let a) = admit(json) else { Issue.record("rejected"); return }
        #expect(a.events[0].decoded == SubmittedNotification(body: a.events[0].body))
        #expect(a.events[0].decoded?.deliverAt == at("2026-01-05T13:00:00.500Z"))
    }

    @Test func check_withdrawWithoutUser_leavesUserToRuntime() {
        guard case .accepted(let a) = admit(#"{"app":"a","id":"n"}"#, op: "withdraw") else { Issue.record("rejected"); return }
        #expect(a.events[0].user == nil)
        #expect(a.events[0].withUser("u").body["user"] == .string("u"))
    }
}
