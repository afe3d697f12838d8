// The delivery line's canonical bytes written directly (no intermediate JSON objects for the envelope).

extension Delivery {
    /// `body.canonicalBytes`, written directly: the envelope and presentation members in
    /// their canonical (UTF-8 sorted) key order, content and items through `JSONValue`.
    /// Byte-identical to `body.canonicalBytes` (tested); about twice as fast.
    public var bodyBytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(512)
        writeBody(to: &out)
        return out
    }

    /// Appends `bodyBytes` to `out` (e.g. after `{"op":"delivery","cursor":n,` — see `writeBody(to:prefix:)`).
    public func writeBody(to out: inout [UInt8]) {
        out.append(UInt8(ascii: "{"))
        var first = true
        func key(_ k: StaticString) {
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            out.append(UInt8(ascii: "\""))
            k.withUTF8Buffer { out.append(contentsOf: $0) }
            out.append(UInt8(ascii: "\""))
            out.append(UInt8(ascii: ":"))
        }
        func string(_ s: String) { JSONValue.string(s).write(to: &out) }
        func bool(_ b: Bool) { JSONValue.bool(b).write(to: &out) }
        // Keys in UTF-8 order: app, at, causeSeq, content, focus, items, kind, notification,
        // presentation, provisional, reason, replaces, rulesVersion, snoozed, summaryAt,
        // timeSensitiveIntro, user.
        if let app { key("app"); string(app) }
        key("at"); string(at.rfc3339)
        key("causeSeq"); JSONValue.int(causeSeq).write(to: &out)
        if let notification { key("content"); notification.contentJSON(previews: previews).write(to: &out) }
        if let focus { key("focus"); string(focus) }
        if kind == .summary || kind == .focusDigest {
            key("items")
            out.append(UInt8(ascii: "["))
            for (i, item) in items.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                item.json.write(to: &out)
            }
            out.append(UInt8(ascii: "]"))
        }
        key("kind"); string(kind.rawValue)
        if let notificationId { key("notification"); string(notificationId) }
        if let p = presentation {
            key("presentation")
            out.append(UInt8(ascii: "{"))
            var pFirst = true
            func pkey(_ k: StaticString, _ v: Bool) {
                if !pFirst { out.append(UInt8(ascii: ",")) }
                pFirst = false
                out.append(UInt8(ascii: "\""))
                k.withUTF8Buffer { out.append(contentsOf: $0) }
                out.append(contentsOf: [UInt8(ascii: "\""), UInt8(ascii: ":")])
                bool(v)
            }
            if let b = p.badge {
                pFirst = false
                out.append(contentsOf: Array("\"badge\":".utf8))
                JSONValue.int(Int64(b)).write(to: &out)
            }
            pkey("banner", p.banner)
            pkey("lockScreen", p.lockScreen)
            pkey("notificationCenter", p.notificationCenter)
            pkey("overrideSilent", p.overrideSilent)
            pkey("sound", p.sound)
            out.append(UInt8(ascii: "}"))
        }
        if provisional { key("provisional"); bool(true) }
        key("reason"); string(reason)
        if let replaces { key("replaces"); string(replaces) }
        key("rulesVersion"); string(rulesVersion)
        if snoozed { key("snoozed"); bool(true) }
        if let summaryAt { key("summaryAt"); string(summaryAt.rfc3339) }
        if timeSensitiveIntro { key("timeSensitiveIntro"); bool(true) }
        key("user"); string(user)
        out.append(UInt8(ascii: "}"))
    }
}
