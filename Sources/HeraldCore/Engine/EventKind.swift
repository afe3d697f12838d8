// The event types the fold knows, as a byte: read once per event, switched on many times.
#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif

/// The stored `type` of an event, decoded once. The fold, the engine's entry points and the
/// readers branch on it; comparing the `type` string there cost a string comparison per
/// branch per event (replay measured ~500 instructions an event).
public enum EventKind: UInt8, Sendable, CaseIterable {
    case submit, withdraw, authorization, settings, provisionalKeep, provisionalTurnOff, summarySchedule,
         focusDefine, focusOn, focusOff, mute, snooze, opened, badgeClear, registerApp, clock
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
        case .other: ""
        }
    }

    /// The kind a stored `type` names (`.other` for any other string).
    public init(_ type: String) {
        var type = type
        self = type.withUTF8 { EventKind(utf8: UnsafeRawBufferPointer($0)) }
    }

    /// The kind the UTF-8 bytes of a `type` name, compared by length first, then bytes.
    public init(utf8 bytes: UnsafeRawBufferPointer) {
        self = .other
        guard let p = bytes.baseAddress else { return }
        for raw in 0..<EventKind.other.rawValue {  // not `allCases`: that builds an array a call
            let kind = EventKind(rawValue: raw)!
            let name = kind.typeName.utf8
            guard name.count == bytes.count else { continue }
            if name.withContiguousStorageIfAvailable({ memcmp($0.baseAddress!, p, bytes.count) == 0 }) == true {
                self = kind
                return
            }
        }
    }
}
