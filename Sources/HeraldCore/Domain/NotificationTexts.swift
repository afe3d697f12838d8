// A notification's title, subtitle and body kept as JSON string bytes, copied in and out without decoding.
#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif

/// The three free texts of a notification (body, subtitle, title), each stored as it appears
/// between the quotes of a JSON string (`writeString`'s escaping), back to back in one buffer.
///
/// Why: these are the largest fields and the engine never reads them. Start-up and replay
/// decode every stored submit and write every delivery; keeping the texts as the stored bytes
/// turns both into copies (no `String` built, no escaping scanned again) and costs one
/// allocation per notification instead of one per long text.
///
/// The layout is canonical — slots in key order (body, subtitle, title), contiguous — so equal
/// texts have equal bytes and the synthesized `==`/`hash` compare what a delivery would carry.
struct NotificationTexts: Hashable, Sendable {
    /// A text's place, in the canonical key order of the content object.
    enum Slot: Int, CaseIterable {
        case body = 0, subtitle, title
    }

    /// The escaped texts, back to back.
    private var bytes: [UInt8] = []
    /// Start and end offset per slot in `bytes` (−1, −1 when absent). Plain 4-byte fields: a
    /// `SIMD8<Int32>` here was 32-byte aligned, and the Swift runtime on Linux allocates any
    /// object aligned to more than 8 bytes with `posix_memalign`, which is dearer than `malloc`
    /// and would be paid for every notification's box.
    private var spans = Spans()

    private struct Span: Hashable {
        var start: Int32 = -1
        var end: Int32 = -1
    }

    private struct Spans: Hashable {
        var body = Span(), subtitle = Span(), title = Span()

        subscript(slot: Int) -> Span {
            get { slot == 0 ? body : slot == 1 ? subtitle : title }
            set {
                if slot == 0 { body = newValue } else if slot == 1 { subtitle = newValue } else { title = newValue }
            }
        }
    }

    init() {}

    func has(_ slot: Slot) -> Bool { spans[slot.rawValue].start >= 0 }

    /// Whether `slot` or a slot after it is present (then a new `slot` cannot simply be appended).
    /// By raw value, not `allCases` (which builds an array a call: this runs per decoded text).
    private func hasAny(from slot: Slot) -> Bool {
        var r = slot.rawValue
        while r <= Slot.title.rawValue {
            if spans[r].start >= 0 { return true }
            r += 1
        }
        return false
    }

    /// The decoded text of a slot (nil when absent).
    func string(_ slot: Slot) -> String? {
        guard has(slot) else { return nil }
        return withEscaped(slot) { raw in
            if !raw.contains(0x5C) { return String(decoding: raw, as: UTF8.self) }
            var quoted: [UInt8] = [0x22]
            quoted.append(contentsOf: raw)
            quoted.append(0x22)
            return (try? JSONValue.parse(quoted))?.stringValue ?? ""
        }
    }

    /// The last byte of a present slot's text when it has no escape (then it is the decoded
    /// text's last byte too); nil when the slot is absent, empty or has an escape.
    func lastUnescapedByte(_ slot: Slot) -> UInt8? {
        guard has(slot) else { return nil }
        return withEscaped(slot) { raw in
            guard let last = raw.last, memchr(raw.baseAddress!, 0x5C, raw.count) == nil else { return nil }
            return last
        }
    }

    /// Writes a present slot as a JSON string (quotes included).
    func write(_ slot: Slot, to out: inout ByteSink) {
        out.append(0x22)
        withEscaped(slot) { out.append($0) }
        out.append(0x22)
    }

    private func withEscaped<R>(_ slot: Slot, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        let start = Int(spans[slot.rawValue].start), end = Int(spans[slot.rawValue].end)
        return bytes.withUnsafeBytes { all in
            body(UnsafeRawBufferPointer(rebasing: all[max(0, start)..<max(0, end)]))
        }
    }

    /// Sets a slot from its escaped bytes (as found between the quotes of a canonical JSON
    /// string). In key order this is a plain append; otherwise the bytes go in place, before the
    /// first present slot after it (one `memmove` of the later texts, no rebuild: producers
    /// commonly send `title` before `body`, and this runs per submit).
    mutating func setEscaped(_ slot: Slot, _ raw: UnsafeRawBufferPointer) {
        if hasAny(from: slot) {
            replace(slot, with: raw)
            return
        }
        if bytes.isEmpty { bytes.reserveCapacity(raw.count * 2) }
        spans[slot.rawValue].start = Int32(bytes.count)
        // As typed bytes: appending a raw buffer goes byte by byte, a typed one by memcpy.
        bytes.append(contentsOf: raw.assumingMemoryBound(to: UInt8.self))
        spans[slot.rawValue].end = Int32(bytes.count)
    }

    /// Sets (or with nil removes) a slot from its decoded text.
    mutating func set(_ slot: Slot, _ value: String?) {
        if value == nil && !has(slot) { return }  // nothing to remove
        guard let value else {
            replace(slot, with: nil)
            return
        }
        var sink = ByteSink(capacity: value.utf8.count + 16)
        defer { sink.deallocate() }
        writeString(value, to: &sink)
        setEscaped(slot, UnsafeRawBufferPointer(rebasing: sink.bytes.dropFirst().dropLast()))
    }

    /// Puts `raw` (nil: nothing) where `slot`'s text is, or would be in key order, and moves the
    /// later slots' offsets by the difference, keeping the layout canonical and contiguous.
    private mutating func replace(_ slot: Slot, with raw: UnsafeRawBufferPointer?) {
        let old: Range<Int>
        if has(slot) {
            old = Int(spans[slot.rawValue].start)..<Int(spans[slot.rawValue].end)
        } else {
            var at = bytes.count
            var r = slot.rawValue + 1
            while r <= Slot.title.rawValue {
                if spans[r].start >= 0 { at = Int(spans[r].start); break }
                r += 1
            }
            old = at..<at
        }
        let new = raw.map { $0.assumingMemoryBound(to: UInt8.self) } ?? UnsafeBufferPointer(start: nil, count: 0)
        bytes.replaceSubrange(old, with: new)
        let delta = Int32(new.count - old.count)
        var r = slot.rawValue + 1
        while r <= Slot.title.rawValue {
            if spans[r].start >= 0 {
                spans[r].start += delta
                spans[r].end += delta
            }
            r += 1
        }
        if raw == nil {
            spans[slot.rawValue] = Span()
        } else {
            spans[slot.rawValue] = Span(start: Int32(old.lowerBound), end: Int32(old.lowerBound + new.count))
        }
    }
}
