// An instant on the engine's time line: whole milliseconds since the Unix epoch, UTC.

/// A point in time as the engine sees it. Time is always an *argument* in HeraldCore:
/// nothing here reads a clock. Millisecond resolution matches the timing wheel's tick
/// and keeps stored times exact (no floating point).
public struct Instant: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// Milliseconds since 1970-01-01T00:00:00Z.
    public var millisecondsSinceEpoch: Int64

    public init(millisecondsSinceEpoch: Int64) {
        self.millisecondsSinceEpoch = millisecondsSinceEpoch
    }

    /// Whole seconds since the epoch.
    public init(secondsSinceEpoch: Int64) {
        self.millisecondsSinceEpoch = secondsSinceEpoch * 1000
    }

    public static let epoch = Instant(millisecondsSinceEpoch: 0)

    public static func < (a: Instant, b: Instant) -> Bool {
        a.millisecondsSinceEpoch < b.millisecondsSinceEpoch
    }

    /// This instant moved by a duration (may be negative).
    public func adding(_ d: Duration) -> Instant {
        Instant(millisecondsSinceEpoch: millisecondsSinceEpoch &+ d.milliseconds)
    }

    /// The duration from `other` to `self`.
    public func since(_ other: Instant) -> Duration {
        Duration(milliseconds: millisecondsSinceEpoch - other.millisecondsSinceEpoch)
    }

    public var description: String { rfc3339 }

    /// A length of engine time in whole milliseconds.
    public struct Duration: Hashable, Comparable, Sendable {
        public var milliseconds: Int64
        public init(milliseconds: Int64) { self.milliseconds = milliseconds }
        public static func milliseconds(_ ms: Int64) -> Duration { Duration(milliseconds: ms) }
        public static func seconds(_ s: Int64) -> Duration { Duration(milliseconds: s * 1000) }
        public static func minutes(_ m: Int64) -> Duration { Duration(milliseconds: m * 60_000) }
        public static func hours(_ h: Int64) -> Duration { Duration(milliseconds: h * 3_600_000) }
        public static func days(_ d: Int64) -> Duration { Duration(milliseconds: d * 86_400_000) }
        public static func < (a: Duration, b: Duration) -> Bool { a.milliseconds < b.milliseconds }
    }
}
