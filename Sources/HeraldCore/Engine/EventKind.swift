// The event types the fold knows, as a byte: read once per event, switched on many times.
#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif

/// The stored `type` of an event, decoded once. The fold, the engine's entry points and the
/// readers branch on it; comparing the `type` string there would cost a string comparison per
/// branch per event, a measurable share of replay.
public enum EventKind: UInt8, Sendable, CaseIterable {
    case submit, withdraw, authorization, settings, provisionalKeep, provisionalTurnOff, summarySchedule,
         focusDefine, focusOn, focusOff, mute, snooze, opened, badgeClear, registerApp, clock, erase
    /// A type this build does not fold (from a newer rules version): ignored.
    case other

    /// The wire and stored name: a literal per case, so asking builds no string (a
    /// `StaticString`'s `description` decoded its bytes into a new one every event, ~1% of replay).
    public var typeName: String {
        switch self {
        case .submit: "submit"
        case .withdraw: "withdraw"
        case .authorization: "authorization"
        case .settings: "settings"
        case .provisionalKeep: "provisionalKeep"
        case .provisionalTurnOff: "provisionalTurnOff"
        case .summarySchedule: "summarySchedule"
        case .focusDefine: "focusDefine"
        case .focusOn: "focusOn"
        case .focusOff: "focusOff"
        case .mute: "mute"
        case .snooze: "snooze"
        case .opened: "opened"
        case .badgeClear: "badgeClear"
        case .registerApp: "registerApp"
        case .clock: "clock"
        case .erase: "erase"
        case .other: ""
        }
    }

    /// The kind a stored `type` names (`.other` for any other string).
    public init(_ type: String) {
        // The common kind first: a small-string compare, not the names' look-up.
        if type == "submit" { self = .submit; return }
        self = type.withUTF8Bytes { EventKind(utf8: UnsafeRawBufferPointer($0)) }
    }

    /// Every kind's name back to back, and where each ends: `typeName` laid out once for decoding.
    private static let nameBytes: [UInt8] = (0..<EventKind.other.rawValue).flatMap { Array(EventKind(rawValue: $0)!.typeName.utf8) }
    private static let nameEnds: [Int] = (0..<EventKind.other.rawValue).reduce(into: []) { ends, raw in
        ends.append((ends.last ?? 0) + EventKind(rawValue: raw)!.typeName.utf8.count)
    }

    /// The kind the UTF-8 bytes of a `type` name, compared by length first, then bytes.
    public init(utf8 bytes: UnsafeRawBufferPointer) {
        self = .other
        guard let p = bytes.baseAddress else { return }
        let found: UInt8? = Self.nameBytes.withUnsafeBytes { names in
            Self.nameEnds.withUnsafeBufferPointer { ends in
                var start = 0
                for raw in 0..<ends.count {
                    let end = ends[raw]
                    if end - start == bytes.count, memcmp(names.baseAddress! + start, p, bytes.count) == 0 { return UInt8(raw) }
                    start = end
                }
                return nil
            }
        }
        if let found { self = EventKind(rawValue: found)! }
    }
}
