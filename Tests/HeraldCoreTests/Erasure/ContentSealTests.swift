// Sealed content (ContentSeal, ContentCipher): round trips, erased forms, and decisions that do not need the content.
@testable import HeraldCore
import Testing

@Suite struct ContentSealTests {
    static let key = ContentKey(generation: 7, bytes: (0..<32).map { UInt8($0) })
    static let otherKey = ContentKey(generation: 8, bytes: (0..<32).map { UInt8(255 - $0) })

    /// A canonical submit body with every content member, escapes, non-ASCII text and a double.
    static let submit: [UInt8] = JSONValue.object([
        "id": "n-1", "app": "com.example.chat", "user": "u", "interruptionLevel": "active",
        "title": "Dinner \"tonight\" ✓", "subtitle": "from Zoë", "body": "Meet at 8\nbring wine",
        "hiddenPreviewsBodyPlaceholder": "New message", "threadId": "t-1", "collapseId": "c-1",
        "relevanceScore": .double(0.25), "sound": "default",
        "actions": .array([.object(["id": "reply", "title": "Reply to Zoë", "destructive": false])]),
        "communication": .object(["sender": "zoe@example.com", "group": "Family"]),
        "data": .object(["order": .int(42), "secret": "s3cr3t-token"]),
    ]).canonicalBytes

    static let contentStrings = ["Dinner", "Zoë", "Meet at 8", "New message", "Reply to", "zoe@example.com", "Family", "s3cr3t-token"]

    func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    @Test func aSealedSubmitKeepsDecisionsInClearAndNoContent() {
        let sealed = ContentSeal.sealSubmit(Self.submit, key: Self.key)
        for s in Self.contentStrings { #expect(!text(sealed).contains(s), "\(s) is readable in \(text(sealed))") }
        for s in ["\"id\":\"n-1\"", "\"threadId\":\"t-1\"", "\"collapseId\":\"c-1\"", "\"interruptionLevel\":\"active\"",
                  "\"relevanceScore\":0.25", "\"sealed\":\"7."] {
            #expect(text(sealed).contains(s))
        }
    }

    @Test func openingWithTheKeyGivesTheOriginalBytesBack() {
        let sealed = ContentSeal.sealSubmit(Self.submit, key: Self.key)
        let opened = sealed.withUnsafeBytes { ContentSeal.open($0) { $0 == 7 ? Self.key.bytes : nil } }
        #expect(opened == .opened(Self.submit))
    }

    @Test func sealingIsDeterministicPerKey() {
        #expect(ContentSeal.sealSubmit(Self.submit, key: Self.key) == ContentSeal.sealSubmit(Self.submit, key: Self.key))
        #expect(ContentSeal.sealSubmit(Self.submit, key: Self.key) != ContentSeal.sealSubmit(Self.submit, key: Self.otherKey))
    }

    @Test func withoutTheKeyTheErasedFormDecodesAsTheErasedNotification() {
        let sealed = ContentSeal.sealSubmit(Self.submit, key: Self.key)
        guard case .erased(let erased) = sealed.withUnsafeBytes({ ContentSeal.open($0) { _ in nil } }) else {
            Issue.record("not erased"); return
        }
        for s in Self.contentStrings { #expect(!text(erased).contains(s)) }
        #expect(erased.withUnsafeBytes { ContentSeal.isErased($0) })
        let original = Self.submit.withUnsafeBytes { SubmittedNotification(canonicalBody: $0) }
        let decoded = erased.withUnsafeBytes { SubmittedNotification(canonicalBody: $0) }
        #expect(decoded == original.erased())
        #expect(decoded.title == nil && decoded.body == nil && decoded.data == nil && decoded.actions.isEmpty)
        #expect(decoded.threadId == "t-1" && decoded.relevanceScore == 0.25)
    }

    /// The sealed bytes of a fixed body under a fixed key never change: a client's retry of a
    /// submit stored earlier is recognised as a duplicate by comparing stored bodies byte for byte.
    @Test func sealedBytesStayTheSameAcrossVersions() {
        let sealed = text(ContentSeal.sealSubmit(Self.submit, key: Self.key))
        #expect(SHA256.hex(sealed.utf8) == "8f6d80ff6b56b085792395744a62a55f34847bb0965538a57aa9356298e64f3f", "\(sealed)")
        let delivery = JSONValue.object(["kind": "alert", "user": "u", "content": .object(["title": "Dinner ✓", "body": "at 8"])]).canonicalBytes
        #expect(SHA256.hex(ContentSeal.sealDelivery(delivery, key: Self.key)) == "22262822e9fdadaffb5b0590cb9a1a64fd3e9e44db7742658fcd64e5143f0f2d")
    }

    /// Each thread reuses its own cipher contexts, keeping the last key's schedule: sealing under
    /// alternating keys on several threads at once gives the bytes one thread gives, and opens.
    @Test func sealingOnManyThreadsUnderAlternatingKeysGivesTheSameBytes() async {
        let keys = [Self.key, Self.otherKey]
        let expected = keys.map { ContentSeal.sealSubmit(Self.submit, key: $0) }
        let results = await withTaskGroup(of: Bool.self) { group in
            for t in 0..<4 {
                group.addTask {
                    (0..<200).allSatisfy { i in
                        let k = (i + t) % 2
                        let sealed = ContentSeal.sealSubmit(Self.submit, key: keys[k])
                        return sealed == expected[k] && ContentSeal.readable(sealed) { _ in keys[k].bytes } == Self.submit
                    }
                }
            }
            return await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        #expect(results == [true, true, true, true])
    }

    @Test func aWrongOrChangedKeyOpensNothing() {
        let sealed = ContentCipher.seal(Array("hello".utf8), key: Self.key.bytes)
        #expect(ContentCipher.open(sealed, key: Self.key.bytes) == Array("hello".utf8))
        #expect(ContentCipher.open(sealed, key: Self.otherKey.bytes) == nil)
        var changed = sealed
        changed[14] ^= 1
        #expect(ContentCipher.open(changed, key: Self.key.bytes) == nil)
    }

    @Test func aBodyWithoutContentIsLeftAsItIs() {
        let withdraw = JSONValue.object(["app": "a", "id": "n", "user": "u"]).canonicalBytes
        #expect(ContentSeal.sealSubmit(withdraw, key: Self.key) == withdraw)
        #expect(withdraw.withUnsafeBytes { ContentSeal.open($0) { _ in nil } } == .clear)
    }

    @Test func base64RoundTrips() {
        for n in 0..<40 {
            let bytes = (0..<n).map { UInt8(truncatingIfNeeded: $0 * 37 + 11) }
            #expect(Base64.decode(Base64.encode(bytes)) == bytes)
        }
        #expect(Base64.encode(Array("foobar".utf8)) == "Zm9vYmFy")
        #expect(Base64.encode(Array("fo".utf8)) == "Zm8=")
    }

    /// A summary's items carry content each: sealed together, opened back in place.
    @Test func aSummaryDeliverySealsEachItemsContent() {
        var h = EngineHarness()
        h.authorize()
        h.send("settings", #"{"user":"u","app":"com.example.mail","delivery":"summary"}"#)
        h.send("summarySchedule", #"{"user":"u","times":["18:00"],"timeZone":"UTC"}"#)
        h.submit("m1")
        h.submit("m2", #""data":{"k":"private-value"}"#)
        let summary = h.advance(to: at("2026-01-05T18:00:00Z")).first { $0.kind == .summary }
        guard let summary else { Issue.record("no summary"); return }
        let body = summary.bodyBytes
        let sealed = ContentSeal.sealDelivery(body, key: Self.key)
        #expect(!text(sealed).contains("Hello") && !text(sealed).contains("private-value"))
        #expect(text(sealed).contains("\"notification\":\"m1\"") && text(sealed).contains("\"notification\":\"m2\""))
        #expect(sealed.withUnsafeBytes { ContentSeal.open($0) { _ in Self.key.bytes } } == .opened(body))
        guard case .erased(let erased) = sealed.withUnsafeBytes({ ContentSeal.open($0) { _ in nil } }) else {
            Issue.record("not erased"); return
        }
        #expect(erased.withUnsafeBytes { ContentSeal.decisionOnly($0) } == body.withUnsafeBytes { ContentSeal.decisionOnly($0) })
    }

    /// After `erase`, a notification held by a Focus is listed in the digest without its content.
    @Test func anEraseFoldLeavesNoContentInTheUsersState() {
        var h = EngineHarness()
        h.authorize()
        h.send("focusOn", #"{"user":"u","focus":"Work"}"#)
        #expect(only(h.submit("m1", #""data":{"k":"private-value"}"#)).kind == .held)
        h.send("erase", #"{"user":"u"}"#)
        let digest = h.send("focusOff", #"{"user":"u","focus":"Work"}"#)
        let all = digest.map { text($0.bodyBytes) }.joined()
        #expect(all.contains("\"notification\":\"m1\""))
        for s in ["Hello", "World", "New mail", "private-value"] { #expect(!all.contains(s), "\(s) in \(all)") }
    }

    /// Replay of an erased user folds erased submits: the decisions are the same, a sender
    /// allowed through a Focus included (by the digest of the name).
    @Test func erasedSubmitsDecideAsTheOriginalsDid() {
        var h = EngineHarness()
        h.register("com.example.chat", ["communication"])
        h.authorize("u", "com.example.chat")
        h.authorize()
        h.send("focusDefine", #"{"user":"u","focus":"Work","allowedPeople":["alice"],"allowTimeSensitive":true}"#)
        h.send("focusOn", #"{"user":"u","focus":"Work"}"#)
        h.submit("c1", app: "com.example.chat", #""communication":{"sender":"alice","group":"G"}"#)
        h.submit("c2", app: "com.example.chat", #""communication":{"sender":"bob"}"#)
        h.submit("m1")
        h.send("focusOff", #"{"user":"u","focus":"Work"}"#)
        let live = h.log.map { $0.bodyBytes.withUnsafeBytes { ContentSeal.decisionOnly($0) } }

        var replay = EngineHarness()
        for ev in h.events {
            var e = ev
            if e.kind == .submit, let user = e.user {
                let sealed = ContentSeal.sealSubmit(e.body.canonicalBytes, key: Self.key)
                guard case .erased(let erased) = sealed.withUnsafeBytes({ ContentSeal.open($0) { _ in nil } }) else { continue }
                e = StoredEvent(seq: e.seq, user: user, type: "submit", body: try! JSONValue.parse(erased), at: e.at)
            }
            replay.now = e.at
            _ = replay.apply(e)
        }
        let derived = replay.log.map { $0.bodyBytes.withUnsafeBytes { ContentSeal.decisionOnly($0) } }
        #expect(derived == live)
        #expect(h.log.contains { $0.notificationId == "c1" && $0.reason == "communication_allowed_person" })
    }

    /// The spliced path and the tree path give the same bytes: sealed, opened and erased.
    @Test func splicingMembersGivesTheTreePathsBytes() {
        let bodies: [[UInt8]] = [
            Self.submit,
            JSONValue.object(["id": "a", "app": "b", "title": "}{\"],[", "data": .object(["x": .array([.object(["}": "]"])])]),
                              "interruptionLevel": "passive", "marketing": true, "relevanceScore": .double(1e-7)]).canonicalBytes,
            JSONValue.object(["id": "only-decisions", "app": "b", "interruptionLevel": "active"]).canonicalBytes,
            // Strings that end in an escaped backslash, or hold escaped quotes next to backslashes.
            JSONValue.object(["id": "x\\", "app": "\\\"", "title": "\\\\\"}", "body": "\"", "data": .object(["k\\": "\\"]),
                              "interruptionLevel": "active"]).canonicalBytes,
            JSONValue.object(["app": "b", "at": "2026-01-05T12:00:00Z", "content": .object(["title": "Hi \u{1F600}", "body": "x"]),
                              "kind": "alert", "notification": "n", "reason": "delivered", "user": "u"]).canonicalBytes,
        ]
        for body in bodies {
            let spliced = ContentSeal.sealSubmit(body, key: Self.key), tree = ContentSeal.treeSealSubmit(body, key: Self.key)
            #expect(spliced == tree, "\(text(spliced)) != \(text(tree))")
            let d = ContentSeal.sealDelivery(body, key: Self.key), dt = ContentSeal.treeSealDelivery(body, key: Self.key)
            #expect(d == dt, "\(text(d)) != \(text(dt))")
            for sealed in [spliced, d] {
                for k: [UInt8]? in [Self.key.bytes, nil] {
                    let a = sealed.withUnsafeBytes { ContentSeal.open($0) { _ in k } }
                    let b = sealed.withUnsafeBytes { ContentSeal.treeOpen($0) { _ in k } }
                    #expect(a == b)
                    if k != nil, sealed != body { #expect(a == .opened(body)) }
                }
            }
        }
    }
}
