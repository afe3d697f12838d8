// A user's folded state as canonical JSON: what `herald state <user> --at …` and `herald pending` show.

extension UserState {
    /// The state as canonical JSON (SPEC §10 "Point in time", "Pending, visible"):
    /// global settings, per-app authorization, settings, badge and mute, the summary
    /// schedule, Focus definitions and switches, pending items with their deadlines,
    /// snoozes and the next wake. Deterministic: apps and Focuses sorted by name, pending
    /// items by seq.
    public var json: JSONValue {
        var g: [String: JSONValue] = [
            "allowNotifications": .bool(global.allowNotifications), "showPreviews": .string(global.showPreviews.rawValue),
        ]
        g["attentionBudget"] = global.attentionBudget.map { .int(Int64($0)) } ?? .null
        var appsJSON: [String: JSONValue] = [:]
        for e in apps.entries {
            let name = e.name, a = e.state
            var o: [String: JSONValue] = [
                "status": .string(a.status.rawValue),
                "options": .array(AuthorizationOptions.wireNames.filter { a.options.contains($0.1) }.map { .string($0.0) }),
                "delivery": .string(a.flags.contains(.summaryDelivery) ? "summary" : "immediate"),
                "badgeCount": .int(Int64(a.badge)),
                "timeSensitiveIntroSeen": .bool(a.flags.contains(.timeSensitiveIntroSeen)),
            ]
            for (setting, flag) in AppFlags.settingNames { o[setting] = .bool(a.flags.contains(flag)) }
            if a.status == .provisional {
                o["provisionalChoice"] = .string(a.provisionalChoice == .undecided ? "undecided"
                    : a.provisionalChoice == .keptImmediate ? "keptImmediate" : "keptSummary")
            }
            if let m = a.mutedUntil { o["mutedUntil"] = .string(m.rfc3339) }
            appsJSON[name] = .object(o)
        }
        var o: [String: JSONValue] = ["user": .string(user), "global": .object(g), "apps": .object(appsJSON),
                                      "lastSeq": .int(lastSeq)]
        if let s = summarySchedule {
            o["summarySchedule"] = .object(["times": .array(s.times.map { .string($0.text) }), "timeZone": .string(s.timeZone)])
        }
        var focuses: [JSONValue] = []
        for d in focus.definitions {
            var f: [String: JSONValue] = [
                "focus": .string(d.name), "allowedPeople": .array(d.allowedPeople.map(JSONValue.string)),
                "allowedApps": .array(d.allowedApps.map(JSONValue.string)), "allowTimeSensitive": .bool(d.allowTimeSensitive),
            ]
            if let c = d.calendar {
                f["timeZone"] = .string(c.timeZone)
                f["schedule"] = .array(c.windows.map {
                    .object(["days": .array($0.days.map { .int(Int64($0)) }), "start": .string($0.start.text), "end": .string($0.end.text)])
                })
            }
            if let off = focus.offUntil[d.name] { f["offUntil"] = .string(off.rfc3339) }
            focuses.append(.object(f))
        }
        o["focuses"] = .array(focuses)
        if let m = focus.manual {
            var mo: [String: JSONValue] = ["focus": .string(m)]
            if let u = focus.manualUntil { mo["until"] = .string(u.rfc3339) }
            o["manualFocus"] = .object(mo)
        }
        o["pending"] = .array(pending.map { p in
            var po: [String: JSONValue] = ["app": .string(p.app), "notification": .string(p.id),
                                           "stage": .string("\(p.stage)"), "seq": .int(p.seq)]
            switch p.stage {
            case .deferred:
                po["decideAt"] = p.deadline.map { .string($0.rfc3339) } ?? .null
                // Withdrawn before it was submitted: decided `withdrawn` then, never delivered (rule 1;
                // the view herald_pending_deferred's withdrawn_before_submit).
                if tombstones.contains(NotificationKey(app: p.app, id: p.id)) { po["withdrawnBeforeSubmit"] = .bool(true) }
            case .queued: po["summaryAt"] = summaryDue.map { .string($0.rfc3339) } ?? .null
            case .held: po["focus"] = heldFocus.map(JSONValue.string) ?? .null
            }
            if let e = p.expiresAt { po["expiresAt"] = .string(e.rfc3339) }
            return .object(po)
        })
        o["snoozes"] = .array(snoozes.map {
            .object(["app": .string($0.app), "notification": .string($0.id), "until": .string($0.until.rfc3339)])
        })
        if let w = nextDeadline() { o["nextWake"] = .string(w.rfc3339) }
        return .object(o)
    }

    /// `json` as of `now` (the instant a fold reached), with what is in force then: the Focus
    /// active (manual or scheduled) and its next change, the scheduled Focuses turned off until
    /// later, and the mutes not yet over — the Focus and mute ends among SPEC §10's scheduled
    /// decisions, which `json` alone leaves to be worked out from the definitions. Without `now`, `json`.
    public func json(at now: Instant?) -> JSONValue {
        guard let now, case .object(var o) = json else { return json }
        o["at"] = .string(now.rfc3339)
        // A manual Focus whose `until` has passed is over, though the state keeps its name until
        // the next Focus event (a scheduled window of the same name may be what is in force).
        let manual = focus.manual(at: now)
        if manual == nil { o["manualFocus"] = nil }
        if let f = focusInForce(at: now) {
            o["activeFocus"] = .object([
                "focus": .string(f.name), "manual": .bool(manual == f.name),
                "nextChange": focus.nextChange(after: now).map { .string($0.rfc3339) } ?? .null,
            ])
        }
        // `focuses[]` as of `now` too: an `offUntil` already past is over and is not listed.
        if case .array(let defs)? = o["focuses"] {
            o["focuses"] = .array(defs.map { d in
                guard case .object(var f) = d, let until = f["offUntil"]?.stringValue.flatMap(Instant.init(rfc3339:)),
                      until <= now else { return d }
                f["offUntil"] = nil
                return .object(f)
            })
        }
        // Scheduled Focuses turned off (`focusOff`) until a later instant: when each comes back
        // is a scheduled decision too (`until` null: off for good).
        o["focusesOff"] = .array(focus.offUntil.keys.sorted().compactMap { name in
            guard let until = focus.offUntil[name], until > now else { return nil }
            return .object(["focus": .string(name), "until": until == .latestRepresentable ? .null : .string(until.rfc3339)])
        })
        o["mutes"] = .array(apps.entries.compactMap { e in
            guard let until = e.state.mutedUntil, until > now else { return nil }
            return .object(["app": .string(e.name), "until": .string(until.rfc3339)])
        })
        return .object(o)
    }
}
