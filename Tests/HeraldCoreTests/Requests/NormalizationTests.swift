// `String.firstNonNFCOffset`: which spellings are Unicode Normalization Form C, and where others depart.
import HeraldCore
import Testing

@Suite struct NormalizationTests {
    @Test func asciiAndPrecomposedTextIsNFC() {
        for s in ["", "alice", "com.example.mail", "Jos\u{E9}", "\u{AC00}", "\u{1EAD}", "日本語", "🙂 emoji",
                  String(repeating: "\u{E9}", count: 300)] {
            #expect(s.isNFC, "\(s.unicodeScalars.map { String($0.value, radix: 16) })")
        }
    }

    @Test func decomposedReorderedAndSingletonSpellingsAreNotNFC() {
        let cases: [(String, Int)] = [
            ("Jose\u{301}", 3),             // e + combining acute: NFC is é
            ("\u{1100}\u{1161}", 0),        // Hangul jamo: NFC is the syllable U+AC00
            ("a\u{302}\u{323}", 0),         // marks out of canonical order: NFC is U+1EAD
            ("x\u{212B}", 1),               // ANGSTROM SIGN: a singleton, NFC is U+00C5
            ("\u{2126}", 0),                // OHM SIGN: NFC is U+03A9
            ("\u{958}", 1),                 // DEVANAGARI QA (E0 A5 98): excluded from composition, NFC is E0 A4 95 E0 A4 BC
            (String(repeating: "a", count: 40) + "e\u{301}", 40),  // past the inline small-string size
        ]
        for (s, offset) in cases {
            #expect(s.firstNonNFCOffset == offset, "\(s.unicodeScalars.map { String($0.value, radix: 16) })")
            #expect(!s.isNFC)
        }
    }

    @Test func nfcSpellingsCompareByBytesAsSwiftComparesThem() {
        // The property the door relies on: two NFC strings are == exactly when their bytes are.
        let spellings = ["Jos\u{E9}", "Jose\u{301}", "\u{C5}", "\u{212B}", "A\u{30A}", "\u{AC00}", "\u{1100}\u{1161}"]
        for a in spellings where a.isNFC {
            for b in spellings where b.isNFC {
                #expect((a == b) == (Array(a.utf8) == Array(b.utf8)))
            }
        }
        #expect(spellings.filter(\.isNFC) == ["Jos\u{E9}", "\u{C5}", "\u{AC00}"])
    }
}
