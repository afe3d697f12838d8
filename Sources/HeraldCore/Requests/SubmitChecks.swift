// SPEC §4 content checks of a submit: errors reject it, warnings are stored and reported.

extension Engine {
    /// The most a fan-out submit may address.
    public static let maxFanOutUsers = 10_000
    /// The largest notification payload, in canonical JSON bytes (SPEC §4: "a body over 4 KiB").
    public static let maxPayloadBytes = 4096
    /// The most actions a notification may carry.
    public static let maxActions = 4
    /// The longest action title without a warning, in characters.
    public static let maxActionTitleCharacters = 20

    /// Action titles that only open the app (compared lowercased, trimmed).
    static let openOnlyTitles: Set<String> = [
        "open", "open app", "open the app", "open in app", "view", "view in app", "show", "launch", "go to app", "see more",
    ]

    func admitSubmit(_ f: RequestFields, apps: AppRegistry, now: Instant?) throws(RequestError) -> AcceptedRequest {
        var warnings: [RequestWarning] = []
        let id = try f.identifier("id", "the notification's id, unique per app")
        let app = try f.identifier("app", "the sending app")

        // Recipients: exactly one of user / users.
        let single = try f.string("user")
        let many = try f.stringArray("users")
        let users: [String]
        switch (single, many) {
        case (.some, .some):
            throw RequestError(code: "user_and_users",
                               title: "submit names both “user” and “users”",
                               detail: "Send “user” for one recipient or “users” (up to \(Engine.maxFanOutUsers)) for a fan-out, not both.")
        case (.none, .none):
            throw f.missing("user", "the recipient; or “users” for a fan-out")
        case (.some(let u), .none):
            try f.checkIdentifier("user", u)
            users = [u]
        case (.none, .some(let us)):
            if us.isEmpty {
                throw RequestError(code: "empty_users", title: "submit has an empty “users” list",
                                   detail: "A fan-out needs at least one recipient. Add users, or send “user” instead.")
            }
            if us.count > Engine.maxFanOutUsers {
                throw RequestError(code: "too_many_users", title: "submit addresses \(us.count) users",
                                   detail: "One fan-out submit may address at most \(Engine.maxFanOutUsers) users. Split it into several requests.")
            }
            for u in us { try f.checkIdentifier("users[]", u) }
            var seen = Set<String>()
            users = us.filter { seen.insert($0).inserted }
            if users.count != us.count {
                warnings.append(RequestWarning(code: "duplicate_users",
                    title: "“users” lists \(us.count - users.count) recipient(s) more than once",
                    detail: "Each recipient gets the notification once; list each one once."))
            }
        }

        var n = SubmittedNotification(id: id, app: app)
        if let l = try f.string("interruptionLevel") {
            guard let level = InterruptionLevel(rawValue: l) else {
                throw RequestError(code: "unknown_interruption_level", title: "Unknown interruption level “\(clipped(l))”",
                                   detail: "“interruptionLevel” must be passive, active, timeSensitive or critical (active when left out).")
            }
            n.level = level
        }
        let title = try f.string("title")
        let subtitle = try f.string("subtitle")
        // Set in the texts' key order (body, subtitle, title): each is then a plain append.
        n.body = try f.string("body")
        n.subtitle = subtitle
        n.title = title
        n.hiddenPreviewsBodyPlaceholder = try f.string("hiddenPreviewsBodyPlaceholder")
        n.threadId = try f.string("threadId")
        n.collapseId = try f.string("collapseId")
        n.sound = try f.string("sound")
        if let r = try f.number("relevanceScore") {
            guard r >= 0, r <= 1 else {
                throw RequestError(code: "relevance_score_out_of_range", title: "relevanceScore \(r) is outside 0…1",
                                   detail: "relevanceScore ranks items in a summary: send a number from 0 (least) to 1 (most relevant).")
            }
            n.relevanceScore = r
        }
        if let acts = try f.array("actions") {
            if acts.count > Engine.maxActions {
                throw RequestError(code: "too_many_actions", title: "Notification has \(acts.count) actions",
                                   detail: "A notification shows at most \(Engine.maxActions) actions. Keep the \(Engine.maxActions) most useful ones.")
            }
            for (i, a) in acts.enumerated() {
                guard case .object(let o) = a else { throw f.wrongType("actions[\(i)]", expected: "an object", got: a) }
                let af = RequestFields(op: f.op, members: o)
                let aid = try af.string("id")
                guard let title = try af.string("title"), !title.trimmed.isEmpty else {
                    throw RequestError(code: "action_without_title", title: "Action \(i + 1) has no title",
                                       detail: "Every action button needs a short title that says what it does, e.g. “Reply” or “Archive”.")
                }
                n.actions.append(NotificationAction(id: aid ?? "", title: title,
                                                    destructive: try af.bool("destructive") ?? false, icon: try af.string("icon")))
                warnings += af.nestedUnknown(["id", "title", "destructive", "icon"], path: "actions[\(i)]", of: "an action")
            }
        }
        if let c = try f.object("communication") {
            let cf = RequestFields(op: f.op, members: c)
            guard let sender = try cf.string("sender"), !sender.isEmpty else { throw f.missing("communication.sender", "who sent it") }
            n.communication = CommunicationInfo(sender: sender, group: try cf.string("group"))
            warnings += cf.nestedUnknown(["sender", "group"], path: "communication", of: "communication")
        }
        n.marketing = try f.bool("marketing") ?? false
        n.deliverAt = try f.instant("deliverAt")
        n.expiresAt = try f.instant("expiresAt")
        n.relevantAt = try f.instant("relevantAt")
        if let d = f.members["data"], d != .null {
            guard case .object = d else { throw f.wrongType("data", expected: "an object", got: d) }
            n.data = d
            if let w = Self.integersBeyond64Bits(in: d) { warnings.append(w) }
        }
        var accepted = try finishSubmit(n, users: users, warnings: warnings, unknownFields: f.unknown(Op.submit.fields),
                                        apps: apps, now: now)
        accepted.fanOut = many != nil
        return accepted
    }

    /// `integer_beyond_64_bits`: an integer in `data` past the 64-bit range (an order number, a
    /// snowflake id written unquoted) is read as a double, which keeps ~16 digits: stored and
    /// delivered rounded. Said at the door, naming the first such member, so the sender quotes it.
    /// (A double written as one, e.g. `1e19`, is the same value and gets the same word.)
    static func integersBeyond64Bits(in data: JSONValue) -> RequestWarning? {
        var first: (path: String, value: Double)?
        var count = 0
        func walk(_ v: JSONValue, _ path: String) {
            switch v {
            case .double(let d) where d.rounded() == d && d.magnitude >= 9.223372036854775808e18:
                count += 1
                if first == nil { first = (path, d) }
            case .object(let o): for k in o.keys.sorted() { walk(o[k]!, path + "." + k) }
            case .array(let a): for (i, e) in a.enumerated() { walk(e, path + "[\(i)]") }
            default: break
            }
        }
        walk(data, "data")
        guard let first else { return nil }
        let more = count > 1 ? " (and \(count - 1) more member\(count > 2 ? "s" : "") like it)" : ""
        return RequestWarning(code: "integer_beyond_64_bits",
            title: "“\(clipped(first.path))”\(more) is a whole number beyond the 64-bit integer range",
            detail: "It is kept and delivered as a 64-bit floating-point number, \(JSONValue.double(first.value).canonicalString), which keeps about 16 significant digits. If it is an id, send it as a string.")
    }

    /// A submit read straight from its line (`SubmitLine`): only what the general path reads
    /// without a refusal or a warning is read there, so the rest of the door is the same.
    func admitSubmit(_ line: SubmitLine, apps: AppRegistry, now: Instant?) throws(RequestError) -> AcceptedRequest {
        try finishSubmit(line.notification, users: line.users, warnings: [], unknownFields: [], apps: apps, now: now)
    }

    /// `admitSubmit(_:apps:now:)` of the request's line (which must be there), its two parts read
    /// where they lie: `if let line = request.submitLine` would copy the whole line first (its
    /// recipients and notification retained and released once more).
    func admitSubmit(lineOf request: borrowing ClientSession.Request, apps: AppRegistry, now: Instant?) throws(RequestError) -> AcceptedRequest {
        try finishSubmit(request.submitLine.unsafelyUnwrapped.notification, users: request.submitLine.unsafelyUnwrapped.users,
                         warnings: [], unknownFields: [], apps: apps, now: now)
    }

    /// The door after the fields are read: checks between fields, warnings, the normalized body
    /// and its size, one draft per recipient.
    private func finishSubmit(_ n: SubmittedNotification, users: [String], warnings: [RequestWarning], unknownFields: [String],
                              apps: AppRegistry, now: Instant?) throws(RequestError) -> AcceptedRequest {
        var warnings = warnings
        let app = n.app, id = n.id

        // Errors between fields.
        if n.marketing && (n.level == .timeSensitive || n.level == .critical) {
            throw RequestError(code: "marketing_not_urgent", title: "Marketing notification sent as \(n.level.rawValue)",
                               detail: "Marketing is never Time Sensitive or Critical. Send it as active or passive.")
        }
        let ents = apps.entitlements(of: app)
        if n.level == .critical && !ents.contains(.critical) {
            throw RequestError(code: "critical_not_entitled", title: "\(app) may not send Critical notifications",
                               detail: "Critical alerts need the app's critical entitlement (registerApp). Send it as timeSensitive, or ask an admin to grant the entitlement.")
        }
        if let e = n.expiresAt, let d = n.deliverAt, e < d {
            throw RequestError(code: "expires_before_deliver",
                               title: "expiresAt \(e.rfc3339) is before deliverAt \(d.rfc3339)",
                               detail: "The notification would expire before it could be delivered. Move expiresAt after deliverAt, or drop one of them.")
        }

        // Warnings.
        if n.communication != nil && !ents.contains(.communication) {
            warnings.append(RequestWarning(code: "communication_not_entitled", title: "\(app) has no communication entitlement",
                detail: "“communication” is ignored and the notification is judged as an ordinary one. Register the app with the communication entitlement (registerApp), or leave “communication” out."))
        }
        // The title is decoded into a `String` only when its last byte leaves the question open.
        if n.titleLastUnescapedByte.map(Engine.mayEndInPunctuation(lastByte:)) ?? true,
           let t = n.title, let last = t.trimmed.last, ".!?,;:…".contains(last) {
            warnings.append(RequestWarning(code: "title_ends_with_punctuation", title: "The title “\(clipped(t))” ends in “\(last)”",
                detail: "Titles read better without ending punctuation; leave it out."))
        }
        // Only actions need it, and `split` allocates an array of substrings: skipped without them.
        let appName = n.actions.isEmpty ? "" : app.split(separator: ".").last.map { String($0).lowercased() } ?? ""
        for (i, a) in n.actions.enumerated() {
            let lower = a.title.trimmed.lowercased()
            if Engine.openOnlyTitles.contains(lower) || (appName.count >= 3 && lower == "open \(appName)") {
                warnings.append(RequestWarning(code: "action_opens_app_only", title: "Action \(i + 1) (“\(clipped(a.title))”) only opens the app",
                    detail: "Tapping the notification already opens the app: give the action a task of its own or remove it."))
            }
            if a.title.count > Engine.maxActionTitleCharacters {
                warnings.append(RequestWarning(code: "action_title_too_long",
                    title: "Action \(i + 1) title “\(clipped(a.title))” is \(a.title.count) characters",
                    detail: "Keep action titles to \(Engine.maxActionTitleCharacters) characters or fewer so they are not cut off."))
            }
            if appName.count >= 3 && lower.contains(appName) {
                warnings.append(RequestWarning(code: "action_title_contains_app_name",
                    title: "Action \(i + 1) title “\(clipped(a.title))” contains the app's name",
                    detail: "The notification already shows the app's name; leave it out of the action title."))
            }
        }
        if let placeholder = n.hiddenPreviewsBodyPlaceholder {
            // A visible ASCII first byte settles it without walking the characters (the usual case).
            let visibleStart = placeholder.utf8.first.map { $0 > 0x20 && $0 < 0x7F } ?? false
            if !visibleStart && placeholder.unicodeScalars.allSatisfy(\.isInvisible) {
                warnings.append(RequestWarning(code: "blank_hidden_previews_placeholder", title: "hiddenPreviewsBodyPlaceholder is blank",
                    detail: "Users who hide previews will see an empty notification. Give a short text such as “New message”, or leave the field out to show “Notification”."))
            }
        } else {
            warnings.append(RequestWarning(code: "missing_hidden_previews_placeholder", title: "No hiddenPreviewsBodyPlaceholder",
                detail: "Users who hide previews will see just “Notification”. Add a short text such as “New message”."))
        }
        if n.level == .timeSensitive, let now {
            for (name, t) in [("deliverAt", n.deliverAt), ("relevantAt", n.relevantAt)] {
                if let t, t.since(now) > .hours(1) {
                    warnings.append(RequestWarning(code: "time_sensitive_far_off",
                        title: "This Time Sensitive notification's \(name) (\(t.rfc3339)) is more than an hour away",
                        detail: "Time Sensitive is for what needs attention now. Send it as active, or submit it closer to the time."))
                }
            }
        }
        for u in unknownFields {
            warnings.append(RequestWarning(code: "unknown_field", title: "Field “\(clipped(u))” is not part of submit", detail: RequestWarning.unknownFieldDetail))
        }

        // The normalized body and its size, in one sink that then receives each recipient's tail:
        // "user" sorts after every other submit field (`Op.submit.fields`), so each recipient's
        // canonical body is the shared one with `,"user":…` before its closing brace. (One
        // buffer and one array per recipient: a copy of the shared body per submit would cost
        // two allocations more.)
        var sink = ByteSink(capacity: 1024)
        defer { sink.deallocate() }
        Engine.writeNormalizedSubmitBody(n, to: &sink)
        let size = sink.count
        if size > Engine.maxPayloadBytes {
            throw RequestError(code: "payload_too_large", title: "Notification is \(size) bytes, over the 4 KiB limit",
                               detail: "The whole notification as stored (every submit field but user/users, as canonical JSON: id, app, texts, actions, data…) may be at most \(Engine.maxPayloadBytes) bytes, as a push payload may. Shorten the texts or move data behind an id the app fetches.")
        }
        let shared = size - 1  // without the closing brace
        func draft(for u: String) -> EventDraft {
            sink.truncate(to: shared)
            sink.append(",\"user\":")
            writeString(u, to: &sink)
            sink.append(UInt8(ascii: "}"))
            return EventDraft(submitFor: u, app: app, notificationId: id, decoded: n, canonicalBody: sink.array)
        }
        // One recipient (most submits): the draft made inside an array literal. Appended to an
        // array it would be built, copied in and destroyed (seven strings and arrays retained and
        // released once more).
        if users.count == 1 { return AcceptedRequest(events: [draft(for: users[0])], warnings: warnings) }
        var events: [EventDraft] = []
        events.reserveCapacity(users.count)
        for u in users { events.append(draft(for: u)) }
        return AcceptedRequest(events: events, warnings: warnings, fanOut: true)
    }

    /// False when the title's last byte is ASCII, not whitespace and not one of `.!?,;:` — then
    /// its last character (trimmed) is no ending punctuation and the `Character` check (a trim and
    /// a search, far dearer than this test) is skipped. Any other ending takes the full check.
    /// Read from the title's last byte `b` in place (`titleLastUnescapedByte`).
    static func mayEndInPunctuation(lastByte b: UInt8) -> Bool {
        guard b < 0x80 else { return true }
        switch b {
        case 0x2E, 0x21, 0x3F, 0x2C, 0x3B, 0x3A: return true  // . ! ? , ; :
        case 0x09...0x0D, 0x1C...0x20: return true  // whitespace (and separators): trimmed first
        default: return false
        }
    }

    /// `JSONValue.object(normalizedSubmitBody(n)).canonicalBytes`, written directly: the keys
    /// are fixed, so they are written in their canonical (UTF-8) order without sorting
    /// (byte-identical: `CanonicalSubmitBodyTests`).
    static func writeNormalizedSubmitBody(_ n: SubmittedNotification, to out: inout ByteSink) {
        // Each key is one literal with its leading `,"` and trailing `":` (one append, as in
        // `writeContent`); the first one's comma becomes the `{`, instead of four appends a key.
        var first = true
        @inline(__always) func key(_ k: StaticString) {
            let at = out.count
            out.append(k)
            if first { out.base[at] = UInt8(ascii: "{"); first = false }
        }
        if !n.actions.isEmpty {
            key(",\"actions\":")
            writeActions(n.actions, to: &out)
        }
        let texts = n.storage.fields.texts  // title, subtitle, body: already canonical JSON string bytes
        key(",\"app\":"); writeString(n.app, to: &out)
        if texts.has(.body) { key(",\"body\":"); texts.write(.body, to: &out) }
        if let v = n.collapseId { key(",\"collapseId\":"); writeString(v, to: &out) }
        if let c = n.communication {
            key(",\"communication\":")
            out.append(UInt8(ascii: "{"))
            if let g = c.group { out.append("\"group\":"); writeString(g, to: &out); out.append(UInt8(ascii: ",")) }
            out.append("\"sender\":"); writeString(c.sender, to: &out)
            out.append(UInt8(ascii: "}"))
        }
        if let v = n.data { key(",\"data\":"); v.write(to: &out) }
        if let v = n.deliverAt { key(",\"deliverAt\":"); v.writeRFC3339String(to: &out) }
        if let v = n.expiresAt { key(",\"expiresAt\":"); v.writeRFC3339String(to: &out) }
        if let v = n.hiddenPreviewsBodyPlaceholder { key(",\"hiddenPreviewsBodyPlaceholder\":"); writeString(v, to: &out) }
        key(",\"id\":"); writeString(n.id, to: &out)
        key(",\"interruptionLevel\":"); out.append(n.level.quotedJSON)
        if n.marketing { key(",\"marketing\":"); out.append("true") }
        if let v = n.relevanceScore { key(",\"relevanceScore\":"); JSONValue.double(v).write(to: &out) }
        if let v = n.relevantAt { key(",\"relevantAt\":"); v.writeRFC3339String(to: &out) }
        if let v = n.sound { key(",\"sound\":"); writeString(v, to: &out) }
        if texts.has(.subtitle) { key(",\"subtitle\":"); texts.write(.subtitle, to: &out) }
        if let v = n.threadId { key(",\"threadId\":"); writeString(v, to: &out) }
        if texts.has(.title) { key(",\"title\":"); texts.write(.title, to: &out) }
        out.append(UInt8(ascii: "}"))
    }

    /// The stored form of a notification: only known fields, canonical values.
    /// The reference form of `writeNormalizedSubmitBody` (tests compare the two; the door writes bytes).
    static func normalizedSubmitBody(_ n: SubmittedNotification) -> [String: JSONValue] {
        var o: [String: JSONValue] = ["id": .string(n.id), "app": .string(n.app), "interruptionLevel": .string(n.level.rawValue)]
        if let v = n.title { o["title"] = .string(v) }
        if let v = n.subtitle { o["subtitle"] = .string(v) }
        if let v = n.body { o["body"] = .string(v) }
        if let v = n.hiddenPreviewsBodyPlaceholder { o["hiddenPreviewsBodyPlaceholder"] = .string(v) }
        if let v = n.threadId { o["threadId"] = .string(v) }
        if let v = n.collapseId { o["collapseId"] = .string(v) }
        if let v = n.relevanceScore { o["relevanceScore"] = .double(v) }
        if let v = n.sound { o["sound"] = .string(v) }
        if !n.actions.isEmpty {
            o["actions"] = .array(n.actions.map { a in
                var ao: [String: JSONValue] = ["id": .string(a.id), "title": .string(a.title), "destructive": .bool(a.destructive)]
                if let i = a.icon { ao["icon"] = .string(i) }
                return .object(ao)
            })
        }
        if let c = n.communication {
            var co: [String: JSONValue] = ["sender": .string(c.sender)]
            if let g = c.group { co["group"] = .string(g) }
            o["communication"] = .object(co)
        }
        if n.marketing { o["marketing"] = .bool(true) }
        if let v = n.deliverAt { o["deliverAt"] = .string(v.rfc3339) }
        if let v = n.expiresAt { o["expiresAt"] = .string(v.rfc3339) }
        if let v = n.relevantAt { o["relevantAt"] = .string(v.rfc3339) }
        if let v = n.data { o["data"] = v }
        return o
    }
}

extension String {
    /// Without leading and trailing whitespace.
    var trimmed: String {
        var s = Substring(self)
        while let f = s.first, f.isWhitespace { s.removeFirst() }
        while let l = s.last, l.isWhitespace { s.removeLast() }
        return String(s)
    }
}

extension Unicode.Scalar {
    /// White space or an invisible format character (zero-width space and joiners, the byte
    /// order mark, bidi marks): a text made only of these shows nothing.
    var isInvisible: Bool {
        properties.isWhitespace || properties.generalCategory == .format
    }
}
