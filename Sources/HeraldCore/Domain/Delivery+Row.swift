// A delivery's stored bytes — trace and body — written once, straight into a byte sink.

extension RuleCode {
    /// `text` as a static string: written into a sink without a `String` in between.
    public var staticText: StaticString {
        switch self {
        case .withdrawn: "withdrawn"
        case .expired: "expired"
        case .notAuthorized: "not_authorized"
        case .silenceAll: "silence_all"
        case .marketing: "marketing"
        case .critical: "critical"
        case .timeSensitiveSetting: "time_sensitive_setting"
        case .provisional: "provisional"
        case .muted: "muted"
        case .collapse: "collapse"
        case .communication: "communication"
        case .summary: "summary"
        case .focus: "focus"
        case .normal: "normal"
        case .attentionBudget: "attention_budget"
        case .timeSensitiveIntro: "time_sensitive_intro"
        case .snooze: "snooze"
        case .badgeClear: "badge_clear"
        }
    }
}

extension RuleOutcome {
    /// `text` as a static string.
    public var staticText: StaticString {
        switch self {
        case .pass: "pass"
        case .decided: "decided"
        case .applied: "applied"
        case .downgraded: "downgraded"
        case .breaksThrough: "breaks_through"
        case .ended: "ended"
        case .fired: "fired"
        }
    }
}

extension RuleTrace {
    /// `["rule",…,"rule:outcome"]` (a `pass` is the bare rule): byte-identical to
    /// `Delivery.traceJSON.canonicalBytes` (codes need no escaping), without a `JSONValue` tree.
    public func writeJSON(to out: inout ByteSink) {
        out.append(UInt8(ascii: "["))
        Self.entryJSON.withUnsafeBufferPointer { table in
            for i in 0..<Int(count) {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                table[Int(self.byte(at: i))].withUnsafeBytes { out.append($0) }
            }
        }
        out.append(UInt8(ascii: "]"))
    }

    /// The quoted stored step (`RuleStep.storedText`) for every entry byte (outcome in the low
    /// 3 bits, rule above): one copy per entry (a decision's trace has ~13 entries).
    private static let entryJSON: [[UInt8]] = (0...255).map { (byte: Int) -> [UInt8] in
        guard let outcome = RuleOutcome(rawValue: UInt8(byte) & 7), let rule = RuleCode(rawValue: UInt8(byte) >> 3) else { return [] }
        var sink = ByteSink(capacity: 64)
        defer { sink.deallocate() }
        sink.append("\"")
        sink.append(rule.staticText)
        if outcome != .pass {
            sink.append(":")
            sink.append(outcome.staticText)
        }
        sink.append("\"")
        return sink.array
    }
}

extension DeliveryItem {
    /// Creates one from its fields.
    public init(_ notification: SubmittedNotification, seq: Int64, previews: ShowPreviews) {
        self.notification = notification; self.seq = seq; self.previews = previews
    }
}

extension Delivery {
    /// The stored trace (`traceJSON.canonicalBytes`), written directly.
    public var traceBytes: [UInt8] {
        withSink(capacity: 256) { ruleTrace.writeJSON(to: &$0) }
    }

    /// Writes the stored body then the stored trace into `scratch` (cleared first) and returns
    /// both as arrays: the two allocations a stored delivery row needs, with one reusable sink.
    public func storedBytes(using scratch: inout ByteSink) -> (body: [UInt8], trace: [UInt8]) {
        let body = storedBody(using: &scratch)
        scratch.removeAll()
        ruleTrace.writeJSON(to: &scratch)
        return (body, scratch.array)
    }

    /// The stored body (`bodyBytes`), written into `scratch` (cleared first) and returned as an array.
    public func storedBody(using scratch: inout ByteSink) -> [UInt8] {
        withUnsafePointer(to: self) { Self.storedBody(at: $0, using: &scratch) }
    }

    /// `storedBody(using:)` of the delivery at `d` (see `writeBody(at:to:)`).
    public static func storedBody(at d: UnsafePointer<Delivery>, using scratch: inout ByteSink) -> [UInt8] {
        scratch.removeAll()
        writeBody(at: d, to: &scratch)
        return scratch.array
    }
}

/// The stored bytes of each distinct trace met so far, shared by every row that has it: most
/// decisions of a workload walk the same rules to the same outcome (a plain alert's trace is the
/// same 13 steps, 494 bytes), so a look-up of the packed trace replaces writing and allocating
/// them per delivery. Bounded: cleared when it holds `capacity` traces (the rules allow far
/// fewer distinct ones in practice).
public struct TraceBytesCache {
    private var entries: [RuleTrace: [UInt8]] = [:]
    /// The trace asked for last and its bytes: consecutive deliveries (a user's due items, a
    /// burst of plain alerts) mostly share one, and comparing four words is cheaper than hashing.
    private var last: (trace: RuleTrace, bytes: [UInt8])?
    /// The most traces kept before the cache starts again.
    public static let capacity = 1_024

    /// Creates an empty cache.
    public init() {}

    /// `trace`'s stored bytes (`RuleTrace.writeJSON`), from the cache or written and kept.
    public mutating func bytes(for trace: RuleTrace) -> [UInt8] {
        if let last, last.trace == trace { return last.bytes }
        let bytes: [UInt8]
        if let known = entries[trace] {
            bytes = known
        } else {
            if entries.count >= Self.capacity { entries.removeAll(keepingCapacity: true) }
            bytes = withSink(capacity: 512) { trace.writeJSON(to: &$0) }
            entries[trace] = bytes
        }
        last = (trace, bytes)
        return bytes
    }

    /// Distinct traces held (tests).
    public var count: Int { entries.count }
}
