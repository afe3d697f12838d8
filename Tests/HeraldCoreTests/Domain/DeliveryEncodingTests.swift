// The hand-written encoders and decoders of the hot path agree exactly with the JSONValue forms.
import Testing
import HeraldCore

@Suite struct DeliveryEncodingTests {
    /// A notification with every field the content can carry, special characters included.
    static var full: SubmittedNotification {
        var n = SubmittedNotification(id: "n\"1", app: "com.example.chat", level: .timeSensitive)
        n.title = "Tea \\ at 5"
        n.subtitle = "from\nBob"
        n.body = "é😀 \u{1}"
        n.hiddenPreviewsBodyPlaceholder = "1 message"
        n.threadId = "t1"
        n.relevanceScore = 0.25
        n.sound = "chime"
        n.actions = [NotificationAction(id: "reply", title: "Reply"),
                     NotificationAction(id: "del", title: "Delete", destructive: true, icon: "trash")]
        n.communication = CommunicationInfo(sender: "bob", group: "family")
        n.data = .object(["z": .int(1), "a": .array([.null, .bool(true)])])
        return n
    }

    @Test func contentBytesEqualContentJSONForEveryPreviewSetting() {
        let sparse = SubmittedNotification(id: "n2", app: "a")
        var senderOnly = SubmittedNotification(id: "n3", app: "a")
        senderOnly.communication = CommunicationInfo(sender: "mom")
        for n in [Self.full, sparse, senderOnly] {
            for previews in ShowPreviews.allCases {
                var out = ByteSink(capacity: 16)  // small: growing is exercised too
                n.writeContent(previews: previews, to: &out)
                #expect(String(decoding: out.bytes, as: UTF8.self) == n.contentJSON(previews: previews).canonicalString, "\(previews)")
                out.deallocate()
            }
        }
    }

    @Test func deliveryBodyBytesEqualTheCanonicalBody() {
        var d = Delivery(kind: .alert, user: "u\"1", app: "com.example.chat", notificationId: "n\"1",
                         at: Instant(rfc3339: "2026-03-27T07:00:00.250Z")!, reason: "authorized",
                         rulesVersion: "1", causeSeq: 42)
        d.notification = Self.full
        d.presentation = Presentation(banner: true, sound: true, badge: 3, lockScreen: true)
        d.focus = "Sleep"
        d.replaces = "n0"
        d.provisional = true
        d.timeSensitiveIntro = true
        d.snoozed = true
        d.summaryAt = Instant(rfc3339: "2026-03-27T08:00:00Z")!
        for previews in ShowPreviews.allCases {
            d.previews = previews
            #expect(d.bodyBytes == d.body.canonicalBytes, "\(previews)")
        }
    }

    @Test func canonicalBodyDecodingEqualsTheGeneralPath() throws {
        let canonical = JSONValue.object([
            "id": "n1", "app": "a", "title": "T", "body": "B", "interruptionLevel": "critical",
            "deliverAt": "2026-03-27T08:00:00Z", "marketing": true, "relevanceScore": 0.5,
            "communication": .object(["sender": "bob"]), "data": .object(["k": .array([1, 2])]),
            "actions": .array([.object(["id": "x", "title": "X"])]), "unknown": .null,
        ]).canonicalString
        let inputs = [
            canonical,
            #"{"title":"T","id":"n1","app":"a"}"#,          // keys out of order: general path
            #"{"id":"n1","id":"n2"}"#,                      // duplicate: unreadable, empty
            #"{"\u0069d":"n1","app":"a"}"#,                 // escaped key: general path
            #" {"app":"a","id":"n1"} "#,                    // whitespace
            #"{"app":"a", "id":"n1"}"#, #"{"app" :"a"}"#, #"{"app": "a"}"#, #"{ "app":"a"}"#,  // whitespace inside
            #"{"é":1,"id":"n1"}"#,                          // non-ASCII key: general path
            #"[1,2]"#, "", "{", #"{"id":"n1"} x"#,
            // Texts with escapes, non-ASCII and control characters (kept as escaped bytes or decoded).
            #"{"body":"a\"b\\c\n\u0001","subtitle":"é😀","title":"\u00e9t\u00E9"}"#,
            #"{"body":"plain","subtitle":"x\/y","title":"T"}"#,
        ]
        let interner = StringInterner(slots: 2)
        for text in inputs {
            let general = SubmittedNotification(body: (try? JSONValue.parse(text)) ?? .object([:]))
            var bytes = Array(text.utf8)
            let direct = bytes.withUnsafeMutableBytes { SubmittedNotification(canonicalBody: UnsafeRawBufferPointer($0)) }
            #expect(direct == general, "\(text)")
            let shared = bytes.withUnsafeMutableBytes { SubmittedNotification(canonicalBody: UnsafeRawBufferPointer($0), interner: interner) }
            #expect(shared == general, "\(text) (interned)")
            #expect(direct.id == general.id && direct.title == general.title && direct.data == general.data, "\(text)")
            #expect(direct.body == general.body && direct.subtitle == general.subtitle, "\(text)")
            for previews in ShowPreviews.allCases {
                var a = ByteSink(capacity: 16), b = ByteSink(capacity: 16)
                direct.writeContent(previews: previews, to: &a)
                general.writeContent(previews: previews, to: &b)
                #expect(Array(a.bytes) == Array(b.bytes), "\(text) \(previews)")
                #expect(String(decoding: a.bytes, as: UTF8.self) == direct.contentJSON(previews: previews).canonicalString, "\(text)")
                a.deallocate(); b.deallocate()
            }
        }
    }

    /// Title, subtitle and body are kept as escaped bytes in one canonical layout: however they
    /// were set, equal texts make equal notifications and equal content bytes.
    @Test func textsSetInAnyOrderGiveEqualNotifications() {
        var a = SubmittedNotification(id: "n", app: "a"), b = a
        a.title = "T \"x\""; a.subtitle = "S"; a.body = "B\n"
        b.body = "old"; b.subtitle = "S"; b.title = "T \"x\""; b.body = "B\n"
        #expect(a == b && a.hashValue == b.hashValue)
        #expect(a.title == "T \"x\"" && b.body == "B\n")
        var c = a
        c.subtitle = nil
        #expect(c != a && c.subtitle == nil && c.title == a.title && c.body == a.body)
    }

    /// `withdraw` and `opened` read from the store carry (app, id) read in place; it must be
    /// what the general parse gives, and nil whenever the fast read cannot be sure.
    @Test func notificationTargetReadsWhatTheBodySays() {
        let cases: [(String, NotificationTarget?)] = [
            (#"{"app":"a","id":"n1","user":"u"}"#, NotificationTarget(app: "a", id: "n1")),
            (#"{"app":"a","user":"u"}"#, NotificationTarget(app: "a", id: nil)),
            (#"{"app":"a\"b","id":"n\u00e9"}"#, NotificationTarget(app: "a\"b", id: "né")),
            (#"{"app":"a","id":7}"#, NotificationTarget(app: "a", id: nil)),
            (#"{"id":"n1","app":"a"}"#, nil),   // not canonical: parse the body instead
            (#"{"app":1,"id":"n1"}"#, nil),
            ("", nil),
        ]
        for (text, expected) in cases {
            var bytes = Array(text.utf8)
            let target = bytes.withUnsafeMutableBytes { NotificationTarget(canonicalBody: UnsafeRawBufferPointer($0)) }
            #expect(target == expected, "\(text)")
        }
    }
}
