// A user's authorization of an app: status and the options it granted.

/// The authorization status a user gave an app (SPEC §3, defaults: `notDetermined`).
public enum AuthorizationStatus: String, Hashable, Sendable, CaseIterable {
    case notDetermined, denied, authorized, provisional
}

/// The options of an `authorization` event: what the app may do.
public struct AuthorizationOptions: OptionSet, Hashable, Sendable {
    public let rawValue: UInt8
    /// Creates one from its fields.
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public static let alert = AuthorizationOptions(rawValue: 1)
    public static let sound = AuthorizationOptions(rawValue: 2)
    public static let badge = AuthorizationOptions(rawValue: 4)
    public static let criticalAlert = AuthorizationOptions(rawValue: 8)

    /// Wire names in a fixed order (for canonical bodies).
    public static let wireNames: [(String, AuthorizationOptions)] = [
        ("alert", .alert), ("sound", .sound), ("badge", .badge), ("criticalAlert", .criticalAlert),
    ]
}

/// What the user chose for a provisionally authorized app from the Keep / Turn Off prompt.
public enum ProvisionalChoice: UInt8, Hashable, Sendable {
    /// No choice yet: deliveries are `quiet` and flagged `provisional`.
    case undecided
    /// Keep → Deliver Immediately: later ones `quiet`, no longer flagged, until settings change.
    case keptImmediate
    /// Keep → Deliver in Scheduled Summary: later ones go to the summary.
    case keptSummary
}
