// The stored form of a user's content: decision fields in clear, content fields in one sealed member.

/// A user's content key: its generation (the key's number; a later key of the same user has a
/// higher one) and its 32 bytes.
public struct ContentKey: Hashable, Sendable {
    public let generation: Int64
    public let bytes: [UInt8]
    /// The key the synthetic nonces are derived under (`ContentCipher.nonceKey`), derived once.
    let nonceKey: [UInt8]
    public init(generation: Int64, bytes: [UInt8]) {
        self.generation = generation; self.bytes = bytes; nonceKey = ContentCipher.nonceKey(bytes)
    }
}

/// Turns a stored body (canonical JSON) into its sealed form and back. Pure: no keys are kept here.
///
/// A sealed body keeps every member a decision reads in clear and moves the content members into
/// `"sealed":"<generation>.<base64 of nonce ‖ ciphertext ‖ tag>"`, the canonical JSON of an object
/// of those members under the user's key of that generation (`ContentCipher`):
/// - a `submit` body: `title`, `subtitle`, `body`, `hiddenPreviewsBodyPlaceholder`, `data`,
///   `actions` and `communication`; a communication's sender is also kept as `senderDigest`
///   (SHA-256 hex of the name), the one thing of it a decision needs (Focus allowed people);
/// - a delivery body: its `content` and each summary item's `content` (as `itemContents`).
///
/// Opening with the key gives the original bytes back exactly (the body was canonical JSON, and
/// canonical JSON is one byte string per value). Without it (the key was erased) opening gives the
/// *erased form*: the clear members and `"contentErased":true`.
public enum ContentSeal {
    /// The members of a submit body that are content.
    public static let submitContentMembers: Set<String> = [
        "title", "subtitle", "body", "hiddenPreviewsBodyPlaceholder", "data", "actions", "communication",
    ]
    /// The member of an erased body that says so.
    public static let erasedMember = "contentErased"
    static let sealedMember = "sealed"
    static let itemContentsMember = "itemContents"
    /// The prefix of an erased communication's sender: the rest is `senderDigest`.
    public static let senderDigestPrefix = "sha256:"

    /// A sealed submit body; the body unchanged when it has no content member or is not an object.
    /// Splices the canonical body's members (`CanonicalMembers`); any other JSON takes the tree path.
    public static func sealSubmit(_ body: [UInt8], key: ContentKey) -> [UInt8] {
        body.withUnsafeBytes { b in
            guard let ms = CanonicalMembers(b) else { return treeSealSubmit(body, key: key) }
            var clear = MemberList(), content = MemberList()
            var sender: String?
            for m in ms.members {
                guard isSubmitContent(m, of: ms) else { clear.add(m, of: ms); continue }
                content.add(m, of: ms)
                if ms.key(m, is: "communication") {
                    sender = (try? JSONValue.parse(UnsafeRawBufferPointer(rebasing: b[m.value])))?["sender"]?.stringValue
                }
            }
            guard !content.isEmpty else { return body }
            if let sender { clear.add("senderDigest", quoted(senderDigest(sender))) }
            clear.add("sealed", sealedValue(content.object(), key: key))
            return clear.object()
        }
    }

    static func isSubmitContent(_ m: CanonicalMembers.Member, of ms: CanonicalMembers) -> Bool {
        switch m.key.count {
        case 4: ms.key(m, is: "body") || ms.key(m, is: "data")
        case 5: ms.key(m, is: "title")
        case 7: ms.key(m, is: "actions")
        case 8: ms.key(m, is: "subtitle")
        case 13: ms.key(m, is: "communication")
        case 29: ms.key(m, is: "hiddenPreviewsBodyPlaceholder")
        default: false
        }
    }

    /// The tree path of `sealSubmit`: any JSON object (the result is canonical).
    static func treeSealSubmit(_ body: [UInt8], key: ContentKey) -> [UInt8] {
        guard case .object(var clear)? = try? JSONValue.parse(body) else { return body }
        var content: [String: JSONValue] = [:]
        for name in submitContentMembers { if let v = clear.removeValue(forKey: name) { content[name] = v } }
        guard !content.isEmpty else { return body }
        if let sender = content["communication"]?["sender"]?.stringValue { clear["senderDigest"] = .string(senderDigest(sender)) }
        clear[sealedMember] = .string(sealedText(JSONValue.object(content).canonicalBytes, key: key))
        return JSONValue.object(clear).canonicalBytes
    }

    /// A sealed delivery body (the delivery line without op and cursor); unchanged without content.
    /// A body without items is spliced (`CanonicalMembers`); a summary's takes the tree path.
    public static func sealDelivery(_ body: [UInt8], key: ContentKey) -> [UInt8] {
        body.withUnsafeBytes { b in
            guard let ms = CanonicalMembers(b), ms.member("items") == nil else { return treeSealDelivery(body, key: key) }
            guard let c = ms.member("content") else { return body }
            var clear = MemberList(), content = MemberList()
            for m in ms.members { if m.key == c.key { content.add(m, of: ms) } else { clear.add(m, of: ms) } }
            clear.add("sealed", sealedValue(content.object(), key: key))
            return clear.object()
        }
    }

    /// The tree path of `sealDelivery`.
    static func treeSealDelivery(_ body: [UInt8], key: ContentKey) -> [UInt8] {
        guard case .object(var clear)? = try? JSONValue.parse(body) else { return body }
        var content: [String: JSONValue] = [:]
        if let c = clear.removeValue(forKey: "content") { content["content"] = c }
        if case .array(var items)? = clear["items"] {
            var contents: [JSONValue] = []
            for i in items.indices {
                if case .object(var item) = items[i] {
                    contents.append(item.removeValue(forKey: "content") ?? .null)
                    items[i] = .object(item)
                } else {
                    contents.append(.null)
                }
            }
            if contents.contains(where: { $0 != .null }) {
                content[itemContentsMember] = .array(contents)
                clear["items"] = .array(items)
            }
        }
        guard !content.isEmpty else { return body }
        clear[sealedMember] = .string(sealedText(JSONValue.object(content).canonicalBytes, key: key))
        return JSONValue.object(clear).canonicalBytes
    }

    /// What a stored body holds once read.
    public enum Opened: Equatable, Sendable {
        /// Not sealed (a body without content, or stored before sealing): as stored.
        case clear
        /// Opened with its key: the original bytes.
        case opened([UInt8])
        /// Its key is gone: the erased form (clear members and `"contentErased":true`).
        case erased([UInt8])
    }

    /// The generation a body is sealed under; nil for a body that is not sealed. Cheap for one that
    /// is not (a byte search, no parse).
    public static func generation(of body: UnsafeRawBufferPointer) -> Int64? {
        guard mayBeSealed(body), case .object(let o)? = try? JSONValue.parse(body),
              let text = o[sealedMember]?.stringValue else { return nil }
        return Int64(text.prefix { $0 != "." })
    }

    /// Opens `body` with `key(generation)`, the user's key of that generation when it exists.
    /// Splices members (`CanonicalMembers`); a summary's item contents take the tree path.
    public static func open(_ body: UnsafeRawBufferPointer, key: (Int64) -> [UInt8]?) -> Opened {
        guard mayBeSealed(body) else { return .clear }
        guard let ms = CanonicalMembers(body), let s = ms.member("sealed"), s.value.count >= 2 else { return treeOpen(body, key: key) }
        let text = String(decoding: body[(s.value.lowerBound + 1)..<(s.value.upperBound - 1)], as: UTF8.self)
        let dot = text.firstIndex(of: ".") ?? text.endIndex
        var clear = MemberList()
        if let generation = Int64(text[..<dot]), let k = key(generation), dot < text.endIndex,
           let sealed = Base64.decode(text[text.index(after: dot)...]),
           let plain = ContentCipher.open(sealed, key: k) {
            let merged: [UInt8]? = plain.withUnsafeBytes { p in
                guard let cm = CanonicalMembers(p), cm.member("itemContents") == nil else { return nil }
                for m in ms.members where !ms.key(m, is: "sealed") && !ms.key(m, is: "senderDigest") { clear.add(m, of: ms) }
                for m in cm.members { clear.add(m, of: cm) }
                return clear.object()
            }
            return merged.map { .opened($0) } ?? treeOpen(body, key: key)
        }
        for m in ms.members where !ms.key(m, is: "sealed") { clear.add(m, of: ms) }
        clear.add("contentErased", Array("true".utf8))
        return .erased(clear.object())
    }

    /// The tree path of `open`: any JSON object.
    static func treeOpen(_ body: UnsafeRawBufferPointer, key: (Int64) -> [UInt8]?) -> Opened {
        guard mayBeSealed(body), case .object(var clear)? = try? JSONValue.parse(body),
              case .string(let text)? = clear.removeValue(forKey: sealedMember) else { return .clear }
        let dot = text.firstIndex(of: ".") ?? text.endIndex
        if let generation = Int64(text[..<dot]), let k = key(generation), dot < text.endIndex,
           let sealed = Base64.decode(text[text.index(after: dot)...]),
           let plain = ContentCipher.open(sealed, key: k),
           case .object(let content)? = try? JSONValue.parse(plain) {
            clear.removeValue(forKey: "senderDigest")
            for (name, v) in content where name != itemContentsMember { clear[name] = v }
            if case .array(let contents)? = content[itemContentsMember], case .array(var items)? = clear["items"] {
                for (i, c) in zip(items.indices, contents) where c != .null {
                    if case .object(var item) = items[i] { item["content"] = c; items[i] = .object(item) }
                }
                clear["items"] = .array(items)
            }
            return .opened(JSONValue.object(clear).canonicalBytes)
        }
        clear[erasedMember] = .bool(true)
        return .erased(JSONValue.object(clear).canonicalBytes)
    }

    /// `open`, as the bytes a reader uses: the original, the erased form, or the stored bytes.
    public static func readable(_ body: [UInt8], key: (Int64) -> [UInt8]?) -> [UInt8] {
        body.withUnsafeBytes { b in
            switch open(b, key: key) {
            case .clear: body
            case .opened(let bytes), .erased(let bytes): bytes
            }
        }
    }

    /// True when `body` is an erased form (`"contentErased":true` at its top level).
    public static func isErased(_ body: UnsafeRawBufferPointer) -> Bool {
        guard contains(body, Array("\"\(erasedMember)\":true".utf8)), case .object(let o)? = try? JSONValue.parse(body) else { return false }
        return o[erasedMember] == .bool(true)
    }

    /// A delivery body reduced to its decision: without its content and its items' content, and
    /// without the erased marker. Replay compares these when a stored delivery's content was erased.
    public static func decisionOnly(_ body: UnsafeRawBufferPointer) -> [UInt8] {
        guard case .object(var o)? = try? JSONValue.parse(body) else { return Array(body) }
        o.removeValue(forKey: "content")
        o.removeValue(forKey: erasedMember)
        o.removeValue(forKey: sealedMember)
        if case .array(var items)? = o["items"] {
            for i in items.indices { if case .object(var item) = items[i] { item.removeValue(forKey: "content"); items[i] = .object(item) } }
            o["items"] = .array(items)
        }
        return JSONValue.object(o).canonicalBytes
    }

    /// The digest kept for a sender: `SHA-256` hex of its name.
    public static func senderDigest(_ sender: String) -> String { SHA256.hex(sender.utf8) }

    /// `<generation>.<base64>` of the canonical content object's bytes.
    static func sealedText(_ content: [UInt8], key: ContentKey) -> String {
        String(decoding: sealedValue(content, key: key).dropFirst().dropLast(), as: UTF8.self)
    }

    /// `sealedText` as a JSON string's bytes, quotes included, written in one array (the cipher's
    /// output on the stack, encoded straight into it).
    static func sealedValue(_ content: [UInt8], key: ContentKey) -> [UInt8] {
        let length = ContentCipher.sealedLength(content.count)
        var out: [UInt8] = [UInt8(ascii: "\"")]
        out.reserveCapacity(24 + (length + 2) / 3 * 4)
        out.append(contentsOf: String(key.generation).utf8)
        out.append(UInt8(ascii: "."))
        content.withUnsafeBytes { plaintext in
            withUnsafeTemporaryAllocation(byteCount: length, alignment: 1) { sealed in
                ContentCipher.seal(plaintext, key: key.bytes, nonceKey: key.nonceKey, into: sealed)
                Base64.encode(UnsafeRawBufferPointer(sealed), into: &out)
            }
        }
        out.append(UInt8(ascii: "\""))
        return out
    }

    /// A JSON string of text that needs no escapes (hex digits, base64, digits and dots).
    static func quoted(_ text: String) -> [UInt8] {
        [UInt8(ascii: "\"")] + Array(text.utf8) + [UInt8(ascii: "\"")]
    }

    /// Whether `"sealed":"` occurs at all (a member name; inside a JSON string a quote is escaped).
    public static func mayBeSealed(_ body: UnsafeRawBufferPointer) -> Bool {
        contains(body, Array("\"\(sealedMember)\":\"".utf8))
    }

    public static func contains(_ body: UnsafeRawBufferPointer, _ needle: [UInt8]) -> Bool {
        guard body.count >= needle.count, let first = needle.first else { return false }
        var i = 0
        let last = body.count - needle.count
        while i <= last {
            if body[i] == first {
                var j = 1
                while j < needle.count && body[i + j] == needle[j] { j += 1 }
                if j == needle.count { return true }
            }
            i += 1
        }
        return false
    }
}
