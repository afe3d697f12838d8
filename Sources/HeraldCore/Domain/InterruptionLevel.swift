// The four interruption levels of SPEC §2 and what each may override.
#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif

/// How urgently a notification may interrupt its recipient (SPEC §2).
public enum InterruptionLevel: String, Hashable, Sendable, CaseIterable {
    /// Notification Center only; never alerts.
    case passive
    /// The default: alerts when delivered normally; respects summary and Focus.
    case active
    /// Overrides the Scheduled Summary; breaks through a Focus that allows Time Sensitive
    /// when the user has not turned Time Sensitive off for the app.
    case timeSensitive
    /// Overrides summary, Focus, mute and Ring/Silent. Needs the app's `critical`
    /// entitlement and the user's `criticalAlert` authorization.
    case critical

    /// Column "overrides Scheduled Summary" of the §2 table.
    public var overridesSummary: Bool { self == .timeSensitive || self == .critical }
    /// Column "overrides Ring/Silent" of the §2 table.
    public var overridesSilent: Bool { self == .critical }
    /// Column "alerts (banner/sound) when delivered normally" of the §2 table.
    public var alertsWhenDeliveredNormally: Bool { self != .passive }
}

extension InterruptionLevel {
    /// The level a raw value's UTF-8 bytes name (nil for anything else), without building a String.
    init?(utf8 raw: UnsafeRawBufferPointer) {
        func named(_ name: StaticString) -> Bool {
            name.utf8CodeUnitCount == raw.count && memcmp(name.utf8Start, raw.baseAddress!, raw.count) == 0
        }
        if named("active") { self = .active } else if named("passive") { self = .passive }
        else if named("timeSensitive") { self = .timeSensitive } else if named("critical") { self = .critical }
        else { return nil }
    }
}

extension InterruptionLevel {
    /// The raw value as a quoted JSON string literal, for the byte writers (no `String` built).
    var quotedJSON: StaticString {
        switch self {
        case .passive: "\"passive\""
        case .active: "\"active\""
        case .timeSensitive: "\"timeSensitive\""
        case .critical: "\"critical\""
        }
    }
}
