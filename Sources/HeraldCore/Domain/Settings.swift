// Per-app and global notification settings of one user, with the SPEC §3 defaults.

/// How an app's notifications are delivered: at once, or in the Scheduled Summary.
public enum DeliveryMode: String, Hashable, Sendable, CaseIterable {
    case immediate, summary
}

/// The user's global preview setting (SPEC §3 "Hidden previews").
public enum ShowPreviews: String, Hashable, Sendable, CaseIterable {
    case always, whenUnlocked, never
}

/// Boolean per-app settings packed in one word, so an app entry stays small.
public struct AppFlags: OptionSet, Hashable, Sendable {
    public let rawValue: UInt16
    /// Creates one from its fields.
    public init(rawValue: UInt16) { self.rawValue = rawValue }
    public static let alert = AppFlags(rawValue: 1 << 0)
    public static let sound = AppFlags(rawValue: 1 << 1)
    public static let badge = AppFlags(rawValue: 1 << 2)
    public static let lockScreen = AppFlags(rawValue: 1 << 3)
    public static let notificationCenter = AppFlags(rawValue: 1 << 4)
    public static let timeSensitive = AppFlags(rawValue: 1 << 5)
    public static let summaryDelivery = AppFlags(rawValue: 1 << 6)
    public static let marketingConsent = AppFlags(rawValue: 1 << 7)
    /// The first Time Sensitive delivery of this app to this user has been made.
    public static let timeSensitiveIntroSeen = AppFlags(rawValue: 1 << 8)

    /// SPEC §3 defaults before any authorization: lock screen, Notification Center and
    /// Time Sensitive on; alert, sound and badge off until `authorization` grants them.
    public static let defaults: AppFlags = [.lockScreen, .notificationCenter, .timeSensitive]

    /// The boolean fields of a `settings` request, by wire name.
    public static let settingNames: [(String, AppFlags)] = [
        ("alert", .alert), ("sound", .sound), ("badge", .badge), ("lockScreen", .lockScreen),
        ("notificationCenter", .notificationCenter), ("timeSensitive", .timeSensitive),
        ("marketingConsent", .marketingConsent),
    ]
}

/// The user's global settings (SPEC §3 defaults: notifications allowed, previews when
/// unlocked, no attention budget).
public struct GlobalSettings: Hashable, Sendable {
    /// `allowNotifications`: false silences everything but allowed critical and government alerts.
    public var allowNotifications: Bool = true
    /// `showPreviews`.
    public var showPreviews: ShowPreviews = .whenUnlocked
    /// `attentionBudget`: at most this many banners in any rolling hour; nil = unlimited.
    public var attentionBudget: Int32? = nil
    /// Creates one from its fields.
    public init() {}
}
