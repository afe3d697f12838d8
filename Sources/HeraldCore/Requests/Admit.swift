// The door for state-changing ops: parse and check one wire request, normalize it into events.

extension Engine {
    /// The door for a dispatched request: its submit read from the line (`SubmitLine`) when the
    /// session read it so, else its body (`admit(op:request:apps:now:)`).
    public func admit(_ request: ClientSession.Request, apps: AppRegistry, now: Instant? = nil) -> Admission {
        guard request.submitLine != nil else { return admit(op: request.op.name, request: request.body, apps: apps, now: now) }
        do throws(RequestError) {
            return .accepted(try admitSubmit(lineOf: request, apps: apps, now: now))
        } catch {
            return .rejected(error)
        }
    }

    /// The door: parse and content-check (SPEC §4) one wire request object for a
    /// state-changing op. `now` is the engine time (used only for the "Time Sensitive more
    /// than an hour away" warning; skipped when nil). Pure: the same inputs give the same
    /// verdict.
    public func admit(op: String, request: JSONValue, apps: AppRegistry, now: Instant? = nil) -> Admission {
        guard case .object(let members) = request else {
            return .rejected(RequestError(code: "wrong_type", title: "The \(op) request is \(article(request.typeName)) \(request.typeName), not an object",
                                          detail: "Send each request as one JSON object on its own line."))
        }
        let f = RequestFields(op: op, members: members)
        do throws(RequestError) {
            if op == "submit" { return .accepted(try admitSubmit(f, apps: apps, now: now)) }
            guard let known = Op(named: op)?.entry, known.path == .door else {
                throw RequestError(code: "unknown_op", title: "Unknown op “\(clipped(op))”",
                                   detail: "The ops that change state are: \(Op.admittedNames.joined(separator: ", ")). Check the spelling.")
            }
            var (draft, warnings) = try admitOther(f, apps: apps, now: now)
            for u in f.unknown(known.fields) {
                warnings.append(RequestWarning(code: "unknown_field", title: "Field “\(clipped(u))” is not part of \(op)", detail: RequestWarning.unknownFieldDetail))
            }
            // Encoded once: kept as the bytes the runtime stores (`storedBody` encoded them again).
            let canonical = draft.body.canonicalBytes
            draft.canonicalBody = canonical
            let size = canonical.count
            if size > Engine.maxPayloadBytes {
                throw RequestError(code: "payload_too_large", title: "\(op) request is \(size) bytes, over the 4 KiB limit",
                                   detail: "A request body may be at most \(Engine.maxPayloadBytes) bytes of canonical JSON. Split it or shorten its lists.")
            }
            return .accepted(AcceptedRequest(events: [draft], warnings: warnings))
        } catch {
            return .rejected(error)
        }
    }

    private func admitOther(_ f: RequestFields, apps: AppRegistry, now: Instant?) throws(RequestError) -> (EventDraft, [RequestWarning]) {
        let op = f.op
        var warnings: [RequestWarning] = []
        var body: [String: JSONValue] = [:]
        var user: String?
        var app: String?
        var nid: String?

        func needUser() throws(RequestError) {
            let u = try f.identifier("user", "the user whose settings change")
            user = u
            body["user"] = .string(u)
        }
        func needApp() throws(RequestError) {
            let a = try f.identifier("app", "the app concerned")
            app = a
            body["app"] = .string(a)
        }
        func needId() throws(RequestError) {
            let i = try f.identifier("id", "the notification's id")
            nid = i
            body["id"] = .string(i)
        }
        func localTime(_ field: String, _ s: String) throws(RequestError) -> LocalTime {
            guard let t = LocalTime(s) else {
                throw RequestError(code: "invalid_local_time", title: "“\(clipped(s))” in \(field) is not a time of day",
                                   detail: "Write local times as HH:MM on a 24-hour clock, from 00:00 to 23:59, e.g. “08:00” or “22:30”.")
            }
            return t
        }
        func calendarError(_ e: CalendarError) -> RequestError {
            RequestError(code: e.code, title: e.title, detail: e.detail)
        }

        switch op {
        case "withdraw":
            try needApp(); try needId()
            if let u = try f.string("user") { try f.checkIdentifier("user", u); user = u; body["user"] = .string(u) }
        case "authorization":
            try needUser(); try needApp()
            let s = try f.requiredString("status", "notDetermined, denied, authorized or provisional")
            guard AuthorizationStatus(rawValue: s) != nil else {
                throw f.invalid("status", s, allowed: AuthorizationStatus.allCases.map(\.rawValue))
            }
            body["status"] = .string(s)
            var opts: AuthorizationOptions = []
            for o in try f.stringArray("options") ?? [] {
                guard let (_, flag) = AuthorizationOptions.wireNames.first(where: { $0.0 == o }) else {
                    throw f.invalid("option", o, allowed: AuthorizationOptions.wireNames.map(\.0))
                }
                opts.insert(flag)
            }
            body["options"] = .array(AuthorizationOptions.wireNames.filter { opts.contains($0.1) }.map { .string($0.0) })
        case "settings":
            try needUser()
            let perApp = try f.string("app")
            let globalNames = ["allowNotifications", "showPreviews", "attentionBudget"]
            let appNames = AppFlags.settingNames.map(\.0) + ["delivery"]
            if let a = perApp {
                try f.checkIdentifier("app", a)
                app = a
                body["app"] = .string(a)
                if let g = globalNames.first(where: { f.members[$0] != nil }) {
                    throw RequestError(code: "global_setting_with_app", title: "“\(clipped(g))” is a global setting, but the request names app \(clipped(a))",
                                       detail: "allowNotifications, showPreviews and attentionBudget apply to all apps: send them in a settings request without “app”.")
                }
                for (name, _) in AppFlags.settingNames { if let v = try f.bool(name) { body[name] = .bool(v) } }
                if let d = try f.string("delivery") {
                    guard DeliveryMode(rawValue: d) != nil else { throw f.invalid("delivery", d, allowed: DeliveryMode.allCases.map(\.rawValue)) }
                    body["delivery"] = .string(d)
                }
            } else {
                if let p = appNames.first(where: { f.members[$0] != nil }) {
                    throw RequestError(code: "app_setting_without_app", title: "“\(clipped(p))” is a per-app setting, but the request names no app",
                                       detail: "Add “app” to say which app's \(p) changes; only allowNotifications, showPreviews and attentionBudget are global.")
                }
                if let v = try f.bool("allowNotifications") { body["allowNotifications"] = .bool(v) }
                if let s = try f.string("showPreviews") {
                    guard ShowPreviews(rawValue: s) != nil else { throw f.invalid("showPreviews", s, allowed: ShowPreviews.allCases.map(\.rawValue)) }
                    body["showPreviews"] = .string(s)
                }
                if let v = f.members["attentionBudget"] {
                    if v == .null {
                        body["attentionBudget"] = .null
                    } else {
                        guard case .int(let n) = v else { throw f.wrongType("attentionBudget", expected: "an integer (banners per hour) or null", got: v) }
                        guard n >= 0, n <= 10_000 else {
                            throw RequestError(code: "attention_budget_out_of_range", title: "attentionBudget \(n) is outside 0…10000",
                                               detail: "attentionBudget is the most banners per hour across apps: send 0…10000, or null for no limit.")
                        }
                        body["attentionBudget"] = .int(n)
                    }
                }
            }
            if body.count == (perApp == nil ? 1 : 2) {
                warnings.append(RequestWarning(code: "no_settings_changed", title: "This settings request changes nothing",
                                               detail: "It names no setting. Name at least one (alert, sound, badge, …) with its new value."))
            }
        case "provisionalKeep":
            try needUser(); try needApp()
            let d = try f.string("delivery") ?? "immediate"
            guard DeliveryMode(rawValue: d) != nil else { throw f.invalid("delivery", d, allowed: DeliveryMode.allCases.map(\.rawValue)) }
            body["delivery"] = .string(d)
        case "provisionalTurnOff", "badgeClear":
            try needUser(); try needApp()
        case "summarySchedule":
            try needUser()
            guard let times = try f.stringArray("times") else { throw f.missing("times", "1 to 12 local times such as “08:00”") }
            guard (1...12).contains(times.count) else {
                throw RequestError(code: "invalid_summary_times", title: "Summary schedule has \(times.count) times",
                                   detail: "A Scheduled Summary fires 1 to 12 times a day. Send between 1 and 12 times.")
            }
            var lts: [LocalTime] = []
            for s in times { lts.append(try localTime("times", s)) }
            let zone = try f.requiredString("timeZone", "an IANA time zone such as Europe/Berlin")
            do throws(CalendarError) { _ = try SummaryCalendar(times: lts, timeZone: zone) } catch { throw calendarError(error) }
            body["times"] = .array(Array(Set(lts)).sorted().map { .string($0.text) })
            body["timeZone"] = .string(zone)
        case "focusDefine":
            try needUser()
            let name = try f.identifier("focus", "the Focus's name")
            body["focus"] = .string(name)
            body["allowedPeople"] = .array(Array(Set(try f.stringArray("allowedPeople") ?? [])).sorted().map(JSONValue.string))
            body["allowedApps"] = .array(Array(Set(try f.stringArray("allowedApps") ?? [])).sorted().map(JSONValue.string))
            body["allowTimeSensitive"] = .bool(try f.bool("allowTimeSensitive") ?? true)
            if let sched = try f.array("schedule"), !sched.isEmpty {
                let zone = try f.requiredString("timeZone", "the IANA time zone of the schedule, such as Europe/Berlin")
                var windows: [FocusWindow] = []
                var out: [JSONValue] = []
                for (i, w) in sched.enumerated() {
                    guard case .object(let o) = w else { throw f.wrongType("schedule[\(i)]", expected: "an object", got: w) }
                    let wf = RequestFields(op: op, members: o)
                    guard let dayValues = try wf.array("days") else { throw f.missing("schedule[\(i)].days", "ISO weekdays 1 (Monday) to 7 (Sunday)") }
                    var days: [Int] = []
                    for d in dayValues {
                        guard case .int(let n) = d, (1...7).contains(n) else {
                            throw RequestError(code: "invalid_weekday", title: "schedule[\(i)].days contains \(d.canonicalString)",
                                               detail: "Days are ISO weekdays: integers 1 (Monday) to 7 (Sunday).")
                        }
                        days.append(Int(n))
                    }
                    days = Array(Set(days)).sorted()
                    let s = try localTime("schedule[\(i)].start", try wf.requiredString("start", "the local start time"))
                    let e = try localTime("schedule[\(i)].end", try wf.requiredString("end", "the local end time"))
                    windows.append(FocusWindow(days: days, start: s, end: e))
                    warnings += wf.nestedUnknown(["days", "start", "end"], path: "schedule[\(i)]", of: "a Focus schedule window")
                    out.append(.object(["days": .array(days.map { .int(Int64($0)) }), "start": .string(s.text), "end": .string(e.text)]))
                }
                do throws(CalendarError) { _ = try FocusCalendar(windows: windows, timeZone: zone) } catch { throw calendarError(error) }
                body["schedule"] = .array(out)
                body["timeZone"] = .string(zone)
            }
        case "focusOn", "focusOff":
            try needUser()
            body["focus"] = .string(try f.identifier("focus", "the Focus's name"))
            if op == "focusOn", let u = try f.instant("until") {
                body["until"] = .string(u.rfc3339)
                if let now, u <= now {
                    warnings.append(RequestWarning(code: "until_not_in_future", title: "until (\(u.rfc3339)) is not after now (\(now.rfc3339))",
                        detail: "No Focus is turned on, and a Focus on by hand is turned off. Send a later until, or check the sender's clock and time zone."))
                }
            }
        case "mute":
            try needUser(); try needApp()
            body["until"] = .string(try f.requiredInstant("until", "when the mute ends (a time now or past unmutes)").rfc3339)
        case "snooze":
            try needUser(); try needApp(); try needId()
            let until = try f.requiredInstant("until", "when the notification alerts again")
            body["until"] = .string(until.rfc3339)
            if let now, until <= now {
                warnings.append(RequestWarning(code: "until_not_in_future", title: "until (\(until.rfc3339)) is not after now (\(now.rfc3339))",
                    detail: "The notification is judged again at once, not later. Send a later until, or check the sender's clock and time zone."))
            }
        case "opened":
            try needUser(); try needApp()
            if let i = try f.string("id") { try f.checkIdentifier("id", i); nid = i; body["id"] = .string(i) }
        case "erase":
            try needUser()
        case "registerApp":
            try needApp()
            var ents: Entitlements = []
            for e in try f.stringArray("entitlements") ?? [] {
                guard let (_, flag) = Entitlements.wireNames.first(where: { $0.0 == e }) else {
                    throw f.invalid("entitlement", e, allowed: Entitlements.wireNames.map(\.0))
                }
                ents.insert(flag)
            }
            body["entitlements"] = .array(Entitlements.wireNames.filter { ents.contains($0.1) }.map { .string($0.0) })
        default:
            throw RequestError(code: "unknown_op", title: "Unknown op “\(clipped(op))”", detail: "Check the spelling.")
        }
        return (EventDraft(user: user, type: op, app: app, notificationId: nid, body: .object(body)), warnings)
    }
}
