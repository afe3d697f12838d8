// Identifiers in Unicode Normalization Form C: the one spelling on which Swift and PostgreSQL agree.
//
// In memory Herald keys users, apps, notifications, Focus and consumer names by `String`, whose
// `==` and hash are Unicode canonical equivalence: "café" with a precomposed é (NFC) and with
// "e" + U+0301 (NFD) are one key. PostgreSQL stores and compares the same names as bytes: two
// rows, two idempotency keys, two consumers' cursors. The two views agree exactly when every
// identifier is NFC (canonically equivalent NFC strings are byte-identical), so the door refuses
// the others (docs/engine.md, "Choices where the spec is silent"; docs/hostile-input.md).

extension String {
    /// The UTF-8 offset at which the text first departs from its Normalization Form C, or nil
    /// when it is NFC. ASCII is always NFC and is decided without normalizing; other text is
    /// compared with the standard library's NFC form (`_withNFCCodeUnits`, the stdlib's public
    /// but underscored entry: HeraldCore has no Foundation and no Unicode tables of its own).
    public var firstNonNFCOffset: Int? {
        let ascii = utf8.withContiguousStorageIfAvailable { bytes in bytes.allSatisfy { $0 < 0x80 } }
            ?? utf8.allSatisfy { $0 < 0x80 }
        if ascii { return nil }
        var own = utf8.makeIterator()
        var offset = 0
        var differs = false
        _withNFCCodeUnits { byte in
            guard !differs else { return }
            if own.next() == byte { offset += 1 } else { differs = true }
        }
        if !differs, own.next() != nil { differs = true }
        return differs ? offset : nil
    }

    /// Whether the text is in Unicode Normalization Form C (see `firstNonNFCOffset`).
    public var isNFC: Bool { firstNonNFCOffset == nil }
}

extension RequestError {
    /// An identifier that is not NFC, refused at the door (the file's comment says why).
    public static func notNFC(_ field: String, of op: String, at offset: Int) -> RequestError {
        RequestError(code: "identifier_not_nfc",
                     title: "“\(field)” of \(op) is not in Unicode Normalization Form C (from byte \(offset) on)",
                     detail: "PostgreSQL compares identifiers byte for byte, so one name spelled two ways (é as one code point, "
                         + "or e and a combining accent) would be two that look alike. Normalize identifiers to NFC before "
                         + "sending them — Python unicodedata.normalize(\"NFC\", s), JavaScript s.normalize(\"NFC\"), Java "
                         + "Normalizer.normalize(s, Normalizer.Form.NFC) — and send the request again.")
    }
}
