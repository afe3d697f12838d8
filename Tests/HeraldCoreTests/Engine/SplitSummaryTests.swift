// SPEC §5 "at most 64 KiB a line", delivery lines too: a summary or Focus digest too long for one line goes out as several.
import HeraldCore
import Testing

@Suite struct SplitSummaryTests {
    /// A submit with its own body (`EngineHarness.submit` sends a short one).
    static func submit(_ h: inout EngineHarness, _ id: String, body: String, _ extra: String = "") {
        h.send("submit", #"{"id":"\#(id)","app":"com.example.mail","user":"u","title":"Hello","body":"\#(body)","hiddenPreviewsBodyPlaceholder":"New mail"\#(extra)}"#)
    }

    /// Forty queued notifications of 3,800 characters would make one 158 kB summary line: the
    /// summary goes out as several at the same instant, every line within the limit, the items in
    /// summary order across them. The Focus digest likewise.
    @Test func wireLine_aSummaryOrDigestTooLongForOneLineGoesOutAsSeveral() {
        let long = String(repeating: "x", count: 3_800)
        var h = EngineHarness(authorizingMail: true)
        h.send("settings", #"{"user":"u","app":"com.example.mail","delivery":"summary"}"#)
        for i in 0..<40 { Self.submit(&h, "s\(i)", body: long, #","relevanceScore":\#(Double(i % 7) / 10)"#) }
        let summaries = h.advance(to: at("2026-01-05T18:00:00Z"))
        let lines = summaries.map { $0.bodyBytes.count + 48 }  // the cursor and op the wire adds
        let items = summaries.flatMap(\.items)
        #expect(summaries.allSatisfy { $0.kind == .summary && $0.at == at("2026-01-05T18:00:00Z") })
        #expect(items.count == 40 && items == items.sorted { a, b in
            let ra = a.notification.relevanceScore ?? 0, rb = b.notification.relevanceScore ?? 0
            return ra != rb ? ra > rb : a.seq < b.seq
        })
        #expect(summaries.count == 3 && lines.allSatisfy { $0 <= Engine.maxDeliveryLineBytes }, "\(lines)")

        h.send("settings", #"{"user":"u","app":"com.example.mail","delivery":"immediate"}"#)
        h.send("focusOn", #"{"user":"u","focus":"Work"}"#)
        for i in 0..<40 { Self.submit(&h, "h\(i)", body: long) }
        let digests = h.send("focusOff", #"{"user":"u","focus":"Work"}"#)
        #expect(digests.flatMap(\.items).map(\.notification.id) == (0..<40).map { "h\($0)" })
        #expect(digests.count == 3)
        #expect(digests.allSatisfy { $0.bodyBytes.count + 48 <= Engine.maxDeliveryLineBytes })
    }

    /// Ordinary summaries are one line, and cost no measuring: `itemsAlwaysFitting` items of
    /// nearly the largest notification the door admits fit one line.
    @Test func wireLine_theLargestNotificationsThatAlwaysFitMakeOneLine() {
        let body = String(repeating: "y", count: 3_700), thread = String(repeating: "t", count: 200)
        var h = EngineHarness(authorizingMail: true)
        h.send("settings", #"{"user":"u","app":"com.example.mail","delivery":"summary"}"#)
        for i in 0..<Engine.itemsAlwaysFitting { Self.submit(&h, "s\(i)", body: body, #","threadId":"\#(thread)""#) }
        let s = only(h.advance(to: at("2026-01-05T18:00:00Z")))
        #expect(s.items.count == Engine.itemsAlwaysFitting && s.bodyBytes.count + 48 <= Engine.maxDeliveryLineBytes)
    }

    /// The parts of a summary or digest split over several lines say which part they are and how
    /// many there are, so a consumer knows when it has all of them; a summary of one line carries
    /// neither.
    @Test func wireLine_theSplitPartsOfASummaryCarryPartAndParts() {
        let long = String(repeating: "x", count: 3_800)
        var h = EngineHarness(authorizingMail: true)
        h.send("settings", #"{"user":"u","app":"com.example.mail","delivery":"summary"}"#)
        for i in 0..<40 { Self.submit(&h, "s\(i)", body: long) }
        let parts = h.advance(to: at("2026-01-05T18:00:00Z"))
        #expect(parts.count == 3)
        let json = parts.map { try! JSONValue.parse(String(decoding: $0.bodyBytes, as: UTF8.self)) }
        #expect(parts.map(\.part) == [1, 2, 3] && parts.allSatisfy { $0.parts == 3 })
        #expect(json.map { $0["part"]?.intValue } == [1, 2, 3])
        #expect(json.allSatisfy { $0["parts"]?.intValue == 3 })
        #expect(zip(parts, json).allSatisfy { $0.bodyBytes == $1.canonicalBytes }, "the direct writer matches the canonical form")
        h.submit("one")
        let single = only(h.advance(to: at("2026-01-06T08:00:00Z")))
        #expect(single.parts == 0 && !String(decoding: single.bodyBytes, as: UTF8.self).contains("\"part"))
    }
}
