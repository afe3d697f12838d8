// Shared strings for repeated stored values: the same text whether or not it came from the cache.
import Testing
import HeraldCore

@Suite struct StringInternerTests {
    @Test func internedStringsEqualFreshlyBuiltOnesForEveryLength() {
        let interner = StringInterner(slots: 4)  // tiny: slots are overwritten all the time
        let texts = ["", "a", "morning", "12345678", "com.example.news", "com.example.news2", "é-ü-ø-长",
                     String(repeating: "x", count: 128), String(repeating: "y", count: 129)]
        for round in 0..<3 {
            for t in texts.shuffled() {
                var copy = t
                let got = copy.withUTF8 { interner.string(UnsafeRawBufferPointer($0)) }
                #expect(got == t, "round \(round)")
                #expect(got.utf8.count == t.utf8.count)
            }
        }
    }

    @Test func parsingWithAnInternerGivesTheSameValue() throws {
        let interner = StringInterner()
        let body = #"{"app":"com.example.news","options":["alert","sound","badge"],"status":"authorized","s":"a\"b","user":"user-1"}"#
        let plain = try JSONValue.parse(body)
        for _ in 0..<3 {
            var bytes = Array(body.utf8)
            let shared = try bytes.withUnsafeMutableBytes { try JSONValue.parse(UnsafeRawBufferPointer($0), interner: interner) }
            #expect(shared == plain)
            #expect(shared.canonicalString == plain.canonicalString)
        }
    }
}
