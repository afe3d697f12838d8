// The common submit read straight from its line: no JSON tree, no dictionary, no field look-ups.
#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif

/// A `submit` request read straight from its line's bytes, for the door's common case: what
/// `ClientSession` dispatches in place of a parsed body, and `Engine.admit(_:apps:now:)` admits.
///
/// Only plain submits are read this way: the envelope (`op`, `rid`, `token`) and the known
/// fields with the JSON types the door expects, each at most once; no actions, communication or
/// data (null is read as absent, as on the general path); recipients and values the door accepts.
/// Anything else — an unknown field, a duplicate key, a value the door would refuse, a duplicate
/// recipient, invalid JSON — reads as nil, and the line takes the general path (`JSONValue.parse`,
/// then `RequestFields`), whose errors and warnings are the reference. So a line read here is
/// admitted exactly as the general path admits it (`SubmitLineTests`; the fuzz target compares
/// the two on every input). Why: most of the general path's cost is building, searching and
/// freeing a dictionary of `JSONValue`s, which a plain submit does not need.
public struct SubmitLine: Sendable {
    /// The request id to echo (a scalar; the general path drops an array or object too).
    public var rid: JSONValue?
    /// The recipients, in request order (none repeated: a repeat takes the general path).
    var users: [String]
    /// The notification as the door's reading builds it (texts kept as their JSON bytes).
    var notification: SubmittedNotification

    /// The sending app, for the token's app check before dispatch.
    public var app: String { notification.app }

    /// True when `app` equals the `knownApp` the reading was given — then it is that string
    /// itself, unless the line spelled the app with escapes (decoded into a string of its own).
    public fileprivate(set) var appIsKnown = false

    /// Replaces `app` by an equal string held elsewhere (the app registry's): comparisons
    /// between the two are then one word, not a byte comparison (`HeraldService.handle`).
    public mutating func shareApp(_ same: String) {
        precondition(same == notification.app, "shareApp: a different app")
        notification.app = same
    }

    /// Reads `line` (one request, without its newline); nil when it is not a plain submit.
    /// `knownApp`: an app id the caller holds (the connection's previous submit's); when the
    /// line names the same bytes, the line's `app` is that string instead of a new one. An app
    /// id is usually over 15 bytes — too long for an inline `String` — so building it would be a
    /// heap allocation, a validation and a free per submit.
    public static func read(_ line: UnsafeRawBufferPointer, knownApp: String? = nil) -> SubmitLine? {
        guard let base = line.baseAddress, !line.isEmpty else { return nil }
        var parser = JSONParser(base: base.assumingMemoryBound(to: UInt8.self), count: line.count, maxDepth: 32)
        return (try? parser.readSubmitLine(knownApp: knownApp)) ?? nil
    }
}

extension JSONParser {
    /// The members `SubmitLine` knows, one bit each (a second occurrence takes the general path).
    private enum SubmitMember: UInt32 {
        case op, rid, token, id, app, user, users, title, subtitle, body, hiddenPreviewsBodyPlaceholder, threadId,
             collapseId, sound, interruptionLevel, relevanceScore, marketing, deliverAt, expiresAt, relevantAt,
             actions, communication, data
    }

    /// A text as found in the line: its bytes between the quotes (no escape), or decoded.
    private enum LineText {
        case plain(start: Int, count: Int)
        case decoded(String)
    }

    /// By length first, then the bytes (as `SubmittedNotification` reads stored bodies).
    private static func submitMember(_ key: UnsafeRawBufferPointer) -> SubmitMember? {
        func named(_ name: StaticString) -> Bool { memcmp(name.utf8Start, key.baseAddress!, key.count) == 0 }
        switch key.count {
        case 2: return named("id") ? .id : named("op") ? .op : nil
        case 3: return named("app") ? .app : named("rid") ? .rid : nil
        case 4: return named("user") ? .user : named("body") ? .body : named("data") ? .data : nil
        case 5: return named("users") ? .users : named("title") ? .title : named("sound") ? .sound : named("token") ? .token : nil
        case 7: return named("actions") ? .actions : nil
        case 8: return named("subtitle") ? .subtitle : named("threadId") ? .threadId : nil
        case 9: return named("deliverAt") ? .deliverAt : named("expiresAt") ? .expiresAt : named("marketing") ? .marketing : nil
        case 10: return named("collapseId") ? .collapseId : named("relevantAt") ? .relevantAt : nil
        case 13: return named("communication") ? .communication : nil
        case 14: return named("relevanceScore") ? .relevanceScore : nil
        case 17: return named("interruptionLevel") ? .interruptionLevel : nil
        case 29: return named("hiddenPreviewsBodyPlaceholder") ? .hiddenPreviewsBodyPlaceholder : nil
        default: return nil
        }
    }

    /// What `RequestFields.checkIdentifier` accepts.
    private static func isIdentifier(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.count <= RequestFields.maxIdentifierBytes && s.isNFC
    }

    /// At a value: the string it is, or nil when it is another type.
    private mutating func stringValue() throws(JSONParseError) -> String? {
        guard p[i] == 0x22 else { return nil }
        return try parseString()
    }

    /// At a value: the string it is (`known` itself when the bytes are its, escape-free), or nil
    /// when it is another type.
    private mutating func appValue(_ known: String?) throws(JSONParseError) -> String? {
        guard let known, p[i] == 0x22 else { return try stringValue() }
        guard let raw = try scanPlainString() else { return try parseString() }
        let same = known.withUTF8Bytes { k in
            k.count == raw.count && (k.count == 0 || memcmp(k.baseAddress!, raw.baseAddress!, k.count) == 0)
        }
        return same ? known : String(decoding: raw, as: UTF8.self)
    }

    /// At a value: an RFC 3339 instant, or nil when the general path must decide.
    private mutating func instantValue() throws(JSONParseError) -> Instant? {
        try stringValue().flatMap(Instant.init(rfc3339:))
    }

    /// `SubmitLine.read`: nil (or a thrown parse error) whenever the general path must decide.
    mutating func readSubmitLine(knownApp: String? = nil) throws(JSONParseError) -> SubmitLine? {
        skipWhitespace()
        guard i < end, p[i] == 0x7B else { return nil }
        try enterContainer(at: i)
        i += 1
        var seen: UInt32 = 0
        var isSubmit = false
        var rid: JSONValue?
        // The fields are written into the notification's box as they are read: a local `Fields`
        // (~290 bytes, a dozen strings) would be copied into the box at the end and destroyed.
        let box = SubmittedNotification.Storage(SubmittedNotification.Fields())
        var hasId = false, hasApp = false, appIsKnown = false
        var user: String?
        var users: [String]?
        var title: LineText?, subtitle: LineText?, body: LineText?
        while true {
            skipWhitespace()
            guard i < end, p[i] == 0x22, let key = try scanPlainString(), let member = Self.submitMember(key) else { return nil }
            let bit: UInt32 = 1 << member.rawValue
            guard seen & bit == 0 else { return nil }
            seen |= bit
            skipWhitespace()
            guard i < end, p[i] == 0x3A else { return nil }
            i += 1
            skipWhitespace()
            guard i < end else { return nil }
            if p[i] == 0x6E, member != .op, member != .rid, member != .token {
                // null: absent, as `RequestFields` reads it.
                try expectLiteral("null")
            } else {
                switch member {
                case .op:
                    guard p[i] == 0x22, let raw = try scanPlainString(), raw.count == 6,
                          memcmp(raw.baseAddress!, ("submit" as StaticString).utf8Start, 6) == 0 else { return nil }
                    isSubmit = true
                case .rid:
                    let v = try parseValue()
                    rid = v.isScalar ? v : nil
                case .token:
                    _ = try parseValue()
                case .id:
                    guard let s = try stringValue(), Self.isIdentifier(s) else { return nil }
                    box.fields.id = s
                    hasId = true
                case .app:
                    guard let s = try appValue(knownApp), Self.isIdentifier(s) else { return nil }
                    box.fields.app = s
                    hasApp = true
                    appIsKnown = knownApp.map { s.utf8.count == $0.utf8.count && s == $0 } ?? false
                case .user:
                    guard let s = try stringValue() else { return nil }
                    user = s
                case .users:
                    guard let list = try stringArray() else { return nil }
                    users = list
                case .title, .subtitle, .body:
                    guard p[i] == 0x22 else { return nil }
                    let text: LineText
                    if let raw = try scanPlainString() {
                        text = .plain(start: i - 1 - raw.count, count: raw.count)
                    } else {
                        text = .decoded(try parseString())
                    }
                    if member == .title { title = text } else if member == .subtitle { subtitle = text } else { body = text }
                case .hiddenPreviewsBodyPlaceholder:
                    guard let s = try stringValue() else { return nil }
                    box.fields.hiddenPreviewsBodyPlaceholder = s
                case .threadId:
                    guard let s = try stringValue() else { return nil }
                    box.fields.threadId = s
                case .collapseId:
                    guard let s = try stringValue() else { return nil }
                    box.fields.collapseId = s
                case .sound:
                    guard let s = try stringValue() else { return nil }
                    box.fields.sound = s
                case .interruptionLevel:
                    guard p[i] == 0x22, let raw = try scanPlainString(), let level = InterruptionLevel(utf8: raw) else { return nil }
                    box.fields.level = level
                case .relevanceScore:
                    guard p[i] == 0x2D || p[i] &- 0x30 < 10, let r = try parseNumber().doubleValue, r >= 0, r <= 1 else { return nil }
                    box.fields.relevanceScore = r
                case .marketing:
                    if p[i] == 0x74 { try expectLiteral("true"); box.fields.marketing = true }
                    else if p[i] == 0x66 { try expectLiteral("false") }
                    else { return nil }
                case .deliverAt:
                    guard let t = try instantValue() else { return nil }
                    box.fields.deliverAt = t
                case .expiresAt:
                    guard let t = try instantValue() else { return nil }
                    box.fields.expiresAt = t
                case .relevantAt:
                    guard let t = try instantValue() else { return nil }
                    box.fields.relevantAt = t
                case .actions, .communication, .data:
                    return nil
                }
            }
            skipWhitespace()
            guard i < end else { return nil }
            if p[i] == 0x2C { i += 1; continue }
            if p[i] == 0x7D { i += 1; break }
            return nil
        }
        depth -= 1
        skipWhitespace()
        guard i == end, isSubmit, hasId, hasApp else { return nil }

        // Recipients as `admitSubmit` checks them; anything it would refuse or warn about is its to say.
        let recipients: [String]
        switch (user, users) {
        case (let u?, nil):
            guard Self.isIdentifier(u) else { return nil }
            recipients = [u]
        case (nil, let us?):
            // A fan-out of one user takes the general path, which marks it a fan-out (its reply
            // counts events); two or more are marked by `finishSubmit` on either path.
            guard us.count > 1, us.count <= Engine.maxFanOutUsers else { return nil }
            for u in us where !Self.isIdentifier(u) { return nil }
            if us.count > 1 {
                var distinct = Set<String>(minimumCapacity: us.count)
                for u in us where !distinct.insert(u).inserted { return nil }
            }
            recipients = us
        default:
            return nil
        }
        // In the texts' key order (body, subtitle, title): each is then a plain append.
        setText(.body, body, in: &box.fields.texts)
        setText(.subtitle, subtitle, in: &box.fields.texts)
        setText(.title, title, in: &box.fields.texts)
        var line = SubmitLine(rid: rid, users: recipients, notification: SubmittedNotification(storage: box))
        line.appIsKnown = appIsKnown
        return line
    }

    private func setText(_ slot: NotificationTexts.Slot, _ text: LineText?, in texts: inout NotificationTexts) {
        switch text {
        case .plain(let start, let count)?: texts.setEscaped(slot, UnsafeRawBufferPointer(start: p + start, count: count))
        case .decoded(let s)?: texts.set(slot, s)
        case nil: break
        }
    }

    /// At a value: an array of strings, or nil when it is anything else.
    private mutating func stringArray() throws(JSONParseError) -> [String]? {
        guard p[i] == 0x5B else { return nil }
        try enterContainer(at: i)
        i += 1
        var list: [String] = []
        skipWhitespace()
        if i < end, p[i] == 0x5D {
            i += 1
        } else {
            while true {
                skipWhitespace()
                guard i < end, let s = try stringValue() else { return nil }
                list.append(s)
                skipWhitespace()
                guard i < end else { return nil }
                if p[i] == 0x2C { i += 1; continue }
                if p[i] == 0x5D { i += 1; break }
                return nil
            }
        }
        depth -= 1
        return list
    }
}

extension SubmitLine {
    /// The property the fast path keeps, for the fuzz target and the tests: when `read` reads
    /// `line`, the general path (parse, envelope, `admit(op:request:apps:now:)`) admits the same
    /// line to the same rid, verdict, drafts (canonical bytes and decoded notification included)
    /// and warnings. True as well when `read` declines the line.
    public static func agreesWithGeneralPath(_ line: UnsafeRawBufferPointer, engine: Engine, apps: AppRegistry,
                                             now: Instant?) -> Bool {
        guard let fast = read(line) else { return true }
        guard case .object(var members)? = try? JSONValue.parse(line) else { return false }
        let rid = members.removeValue(forKey: "rid").flatMap { $0.isScalar ? $0 : nil }
        guard rid == fast.rid, members.removeValue(forKey: "op") == .string("submit") else { return false }
        let general = engine.admit(op: "submit", request: .object(members), apps: apps, now: now)
        let quick: Admission
        do throws(RequestError) {
            quick = .accepted(try engine.admitSubmit(fast, apps: apps, now: now))
        } catch {
            quick = .rejected(error)
        }
        guard general == quick else { return false }
        if case .accepted(let a) = general, case .accepted(let b) = quick {
            for (x, y) in zip(a.events, b.events) where x.canonicalBody != y.canonicalBody || x.decoded != y.decoded {
                return false
            }
        }
        return true
    }
}
