// The stored row's byte writers (trace, summary items, the ack template) agree exactly with the JSONValue forms.
import Testing
@testable import HeraldCore

@Suite struct DeliveryRowBytesTests {
    @Test func staticCodesEqualTheirText() {
        for c in RuleCode.allCases { #expect(c.staticText.description == c.text) }
        for o in RuleOutcome.allCases { #expect(o.staticText.description == o.text) }
    }

    @Test func traceBytesEqualTheCanonicalTrace() {
        var d = Delivery(kind: .alert, user: "u", app: "a", notificationId: "n", at: Instant(millisecondsSinceEpoch: 0),
                         reason: "normal", rulesVersion: "1", causeSeq: 1)
        #expect(d.traceBytes == d.traceJSON.canonicalBytes)  // empty: []
        // Every rule with every outcome, past the inline capacity (extra steps are dropped on both sides).
        var i = 0
        for c in RuleCode.allCases {
            for o in RuleOutcome.allCases where (i + Int(o.rawValue)) % 3 == 0 {
                d.ruleTrace.append(c, o)
                #expect(d.traceBytes == d.traceJSON.canonicalBytes, "\(c) \(o)")
            }
            i += 1
        }
        var scratch = ByteSink(capacity: 8)  // small: growing is exercised
        defer { scratch.deallocate() }
        let (body, trace) = d.storedBytes(using: &scratch)
        #expect(body == d.body.canonicalBytes)
        #expect(trace == d.traceJSON.canonicalBytes)
    }

    /// The stored trace is compact: a `pass` is the bare rule, anything else
    /// `rule:outcome`; every step read back gives the step written, and the old object form reads too.
    @Test func storedTraceIsCompactAndReadsBackInEitherFormat() throws {
        var d = Delivery(kind: .held, user: "u", app: "a", notificationId: "n", at: Instant(millisecondsSinceEpoch: 0),
                         reason: "focus", rulesVersion: "1", causeSeq: 1)
        d.ruleTrace.append(.withdrawn, .pass)
        d.ruleTrace.append(.critical, .downgraded)
        d.ruleTrace.append(.focus, .decided)
        let stored = String(decoding: d.traceBytes, as: UTF8.self)
        #expect(stored == #"["withdrawn","critical:downgraded","focus:decided"]"#)
        #expect(RuleStep.steps(storedTrace: stored) == d.trace)
        let old = #"[{"outcome":"pass","rule":"withdrawn"},{"outcome":"downgraded","rule":"critical"},{"outcome":"decided","rule":"focus"}]"#
        #expect(RuleStep.steps(storedTrace: old) == d.trace)
        #expect(RuleStep.steps(storedTrace: "[]") == [])
        #expect(RuleStep.steps(storedTrace: #"[1]"#) == nil)
        #expect(RuleStep.steps(storedTrace: "{") == nil)
        // A plain alert's 13 steps: what each delivery row carries.
        var plain = RuleTrace()
        for c in RuleCode.allCases.prefix(13) { plain.append(c, .pass) }
        plain.append(.normal, .decided)
        #expect(withSink(capacity: 256) { plain.writeJSON(to: &$0) }.count < 220)
    }

    /// The service shares one array per distinct trace (`TraceBytesCache`): the bytes must be
    /// exactly what each delivery's own trace writes, and a full cache starts again.
    @Test func cachedTraceBytesEqualEachDeliverysOwnTrace() {
        var cache = TraceBytesCache()
        var traces: [RuleTrace] = [RuleTrace()]
        for c in RuleCode.allCases {
            var t = traces.last!
            t.append(c, RuleOutcome.allCases[Int(c.rawValue) % RuleOutcome.allCases.count])
            traces.append(t)
        }
        for _ in 0..<2 {
            for t in traces {
                var d = Delivery(kind: .alert, user: "u", app: "a", notificationId: "n", at: Instant(millisecondsSinceEpoch: 0),
                                 reason: "normal", rulesVersion: "1", causeSeq: 1)
                d.ruleTrace = t
                #expect(cache.bytes(for: t) == d.traceJSON.canonicalBytes)
            }
        }
        #expect(cache.count == traces.count)
        var full = TraceBytesCache()
        for n in 0..<(TraceBytesCache.capacity + 5) {
            var t = RuleTrace()
            for bit in 0..<11 { t.append(n >> bit & 1 == 0 ? .muted : .focus, .pass) }
            #expect(full.bytes(for: t) == JSONValue.array(t.steps.map(\.json)).canonicalBytes)
        }
        #expect(full.count == 5)
    }

    /// The trace asked for last is answered from a memo: repeats, alternations and a trace that
    /// differs only in its last step each get their own bytes.
    @Test func repeatedAndAlternatingTracesGetTheirOwnBytes() {
        var cache = TraceBytesCache()
        var a = RuleTrace(.withdrawn, .pass)
        a.append(.normal, .decided)
        var b = RuleTrace(.withdrawn, .pass)
        b.append(.normal, .pass)
        let own = { (t: RuleTrace) in withSink(capacity: 256) { t.writeJSON(to: &$0) } }
        for t in [a, a, b, a, b, b, RuleTrace(), a] {
            #expect(cache.bytes(for: t) == own(t))
        }
        #expect(cache.count == 3)
    }

    @Test func summaryBodyBytesEqualTheCanonicalBody() {
        var d = Delivery(kind: .summary, user: "u1", app: nil, notificationId: nil,
                         at: Instant(rfc3339: "2026-03-27T08:00:00Z")!, reason: "summary", rulesVersion: "1", causeSeq: 7)
        var sparse = SubmittedNotification(id: "n2", app: "com.example.b")
        sparse.threadId = "t\"2"
        for previews in ShowPreviews.allCases {
            d.items = [DeliveryItem(DeliveryEncodingTests.full, seq: 3, previews: previews),
                       DeliveryItem(sparse, seq: 5, previews: previews),
                       DeliveryItem(SubmittedNotification(id: "n3", app: "a"), seq: 9, previews: previews)]
            #expect(d.bodyBytes == d.body.canonicalBytes, "\(previews)")
            d.kind = .focusDigest
            d.focus = "Sleep"
            #expect(d.bodyBytes == d.body.canonicalBytes, "\(previews)")
            d.kind = .summary
            d.focus = nil
        }
        d.items = []
        #expect(d.bodyBytes == d.body.canonicalBytes)
    }

    @Test func theAckTemplateEqualsTheGeneralReply() {
        let warnings = [RequestWarning(code: "title_punctuation", title: "The title ends in \"!\"", detail: "Titles \"end\" without punctuation."),
                        RequestWarning(code: "no_placeholder", title: "é", detail: "")]
        let rids: [JSONValue?] = [nil, .int(7), .int(-3), .string("r\"1"), .double(0.5), .bool(true), .null]
        var scratch = ByteSink(capacity: 8)  // one sink for every reply, as the service uses it
        defer { scratch.deallocate() }
        for rid in rids {
            for w in [[], warnings] {
                for seq: Int64 in [0, 1, 9_223_372_036_854_775_807] {
                    for partition in [0, 7, 1023] {
                        let expected = WireReply.ok(rid: rid, ["partition": .int(Int64(partition)), "seq": .int(seq), "warnings": .array(w.map(\.json))])
                        #expect(WireReply.appended(rid: rid, partition: partition, seq: seq, warnings: w) == expected, "\(String(describing: rid)) \(seq)")
                        #expect(WireReply.appended(rid: rid, partition: partition, seq: seq, warnings: w, using: &scratch) == expected)
                    }
                }
            }
        }
    }
}

@Suite struct CanonicalSubmitBodyTests {
    /// The door's canonical bytes of each recipient's body are exactly the body's canonical encoding.
    @Test func theDoorsCanonicalBodyEqualsTheEncodedBody() throws {
        let requests = [
            #"{"id":"n1","app":"com.example.mail","user":"u1","title":"Hi","body":"B"}"#,
            #"{"id":"n\"2","app":"a","users":["u\"1","é","u3","u3"],"interruptionLevel":"timeSensitive","title":"T","subtitle":"S","body":"x\ny","hiddenPreviewsBodyPlaceholder":"p","threadId":"t","collapseId":"c","relevanceScore":0.5,"sound":"s","actions":[{"id":"r","title":"Reply","icon":"i"},{"id":"d","title":"Del\\ete","destructive":true}],"communication":{"sender":"bob","group":"g"},"deliverAt":"2026-03-27T09:00:00Z","expiresAt":"2026-03-28T09:00:00.5Z","relevantAt":"2026-03-27T09:00:00+01:00","data":{"z":[1,{"b":null,"a":true}],"user":"not the user"},"zzz":1}"#,
            #"{"id":"n3","app":"a","user":"u","marketing":true}"#,
            #"{"id":"n4","app":"a","user":"u","relevanceScore":1,"communication":{"sender":"s"},"data":{}}"#,
            #"{"id":"n5","app":"a","user":"u","relevanceScore":0,"title":"","interruptionLevel":"passive"}"#,
        ]
        for text in requests {
            guard case .accepted(let a) = Engine().admit(op: "submit", request: try JSONValue.parse(text), apps: AppRegistry(),
                                                          now: Instant(rfc3339: "2026-03-27T08:00:00Z")) else {
                Issue.record("not accepted: \(text)"); continue
            }
            #expect(!a.events.isEmpty)
            for e in a.events {
                #expect(e.canonicalBody != nil)
                #expect(!e.holdsBodyValue)  // the body is parsed from the bytes only when asked for
                // The reference: the normalized body as a dictionary, encoded by the generic encoder.
                var o = Engine.normalizedSubmitBody(try #require(e.decoded))
                o["user"] = .string(try #require(e.user))
                #expect(e.storedBody == JSONValue.object(o).canonicalBytes, "\(text)")
                #expect(e.body == .object(o))
            }
        }
    }
}

@Suite struct NotificationTextsOrderTests {
    /// A notification's box is one `malloc` per submit: the Swift runtime on Linux allocates an
    /// object whose fields are aligned to more than 8 bytes with `posix_memalign` (a `SIMD8`
    /// among the texts' offsets would do that).
    @Test func aNotificationsFieldsNeedNoMoreThanEightByteAlignment() {
        #expect(MemoryLayout<NotificationTexts>.alignment <= 8)
        #expect(MemoryLayout<SubmittedNotification.Fields>.alignment <= 8)
    }

    /// Texts set in key order (appended) equal texts set in any other order (rebuilt).
    @Test func settingTextsInKeyOrderEqualsAnyOtherOrder() {
        var a = SubmittedNotification(id: "n", app: "a")
        a.subtitle = nil
        a.body = "b\"1 é"
        a.subtitle = "s\\"
        a.title = "t\n"
        var b = SubmittedNotification(id: "n", app: "a")
        b.title = "t\n"
        b.subtitle = "s\\"
        b.body = "b\"1 é"
        #expect(a == b)
        #expect(a.title == "t\n" && a.subtitle == "s\\" && a.body == "b\"1 é")
        for previews in ShowPreviews.allCases {
            var x = ByteSink(capacity: 16), y = ByteSink(capacity: 16)
            a.writeContent(previews: previews, to: &x)
            b.writeContent(previews: previews, to: &y)
            #expect(x.array == y.array)
            #expect(String(decoding: x.bytes, as: UTF8.self) == a.contentJSON(previews: previews).canonicalString)
            x.deallocate(); y.deallocate()
        }
        var c = SubmittedNotification(id: "n", app: "a")
        c.title = "only"
        c.body = nil
        #expect(c.title == "only" && c.body == nil && c.subtitle == nil)
    }

    /// Every order of setting, replacing and removing texts gives the bytes of setting the final
    /// texts in key order: texts are put in place, not appended, and nothing is rebuilt.
    @Test func textsPutInPlaceInEveryOrderKeepTheCanonicalLayout() {
        typealias Step = (WritableKeyPath<SubmittedNotification, String?>, String?)
        let paths: [WritableKeyPath<SubmittedNotification, String?>] = [\.body, \.subtitle, \.title]
        let values: [String?] = ["x\"é", "", nil, "longer text \\ with escapes\n"]
        var checked = 0
        // Three steps, each setting one of the three slots to one of the values, in every order.
        for a in 0..<12 { for b in 0..<12 { for c in 0..<12 {
            let steps: [Step] = [a, b, c].map { (paths[$0 % 3], values[$0 / 3]) }
            var n = SubmittedNotification(id: "n", app: "a")
            var final: [String?] = [nil, nil, nil]
            for (path, value) in steps {
                n[keyPath: path] = value
                final[paths.firstIndex(of: path)!] = value
            }
            var reference = SubmittedNotification(id: "n", app: "a")
            for (i, path) in paths.enumerated() where final[i] != nil { reference[keyPath: path] = final[i] }
            #expect(n == reference, "steps \(a) \(b) \(c)")
            #expect(n.body == final[0] && n.subtitle == final[1] && n.title == final[2])
            var x = ByteSink(capacity: 16), y = ByteSink(capacity: 16)
            n.writeContent(previews: .always, to: &x)
            reference.writeContent(previews: .always, to: &y)
            #expect(x.array == y.array)
            x.deallocate(); y.deallocate()
            checked += 1
        } } }
        #expect(checked == 1728)
    }
}
