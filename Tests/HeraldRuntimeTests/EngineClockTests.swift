// Engine time from given wall-clock readings: never backwards, steps logged once, the manual clock untouched by the wall.
@testable import HeraldRuntime
import HeraldCore
import Testing

@Suite struct EngineClockTests {
    static func at(_ text: String) -> Instant { Instant(rfc3339: text)! }

    @Test func engineTimeFollowsTheWallClockAndNeverGoesBack() {
        var clock = EngineClock()
        var logged: [String] = []
        #expect(clock.read(wall: Self.at("2026-03-27T07:00:00Z"), monotonic: 0) { logged.append($0) } == Self.at("2026-03-27T07:00:00Z"))
        #expect(clock.read(wall: Self.at("2026-03-27T07:00:01Z"), monotonic: 1_000) { logged.append($0) } == Self.at("2026-03-27T07:00:01Z"))
        // Back by a second (a small correction): held, not logged.
        #expect(clock.read(wall: Self.at("2026-03-27T07:00:00Z"), monotonic: 1_100) { logged.append($0) } == Self.at("2026-03-27T07:00:01Z"))
        #expect(logged.isEmpty && !clock.wallClockBehind)
    }

    @Test func aBackwardStepIsLoggedOnceAndItsCatchingUpOnce() {
        var clock = EngineClock()
        var logged: [String] = []
        _ = clock.read(wall: Self.at("2026-03-27T07:00:00Z"), monotonic: 0) { logged.append($0) }
        #expect(clock.read(wall: Self.at("2026-03-27T06:00:00Z"), monotonic: 1_000) { logged.append($0) } == Self.at("2026-03-27T07:00:00Z"))
        #expect(clock.read(wall: Self.at("2026-03-27T06:30:00Z"), monotonic: 2_000) { logged.append($0) } == Self.at("2026-03-27T07:00:00Z"))
        #expect(logged == ["warning: the wall clock went back to 2026-03-27T06:00:00Z, 3600 s behind engine time; engine time holds at 2026-03-27T07:00:00Z until the wall clock passes it (no timer fires early)"])
        #expect(clock.wallClockBehind)
        logged = []
        // 07:00:01 read 30 min 1 s of wall after 06:30 in 1 s of monotonic time: it also jumped forward.
        #expect(clock.read(wall: Self.at("2026-03-27T07:00:01Z"), monotonic: 3_000) { logged.append($0) } == Self.at("2026-03-27T07:00:01Z"))
        #expect(logged == ["notice: the wall clock caught up with engine time at 2026-03-27T07:00:01Z",
                           "warning: the wall clock jumped forward 1800 s to 2026-03-27T07:00:01Z; timers due in the skipped interval fire now, each with its own instant"])
        #expect(!clock.wallClockBehind)
    }

    @Test func aForwardStepIsMeasuredAgainstMonotonicTime() {
        var clock = EngineClock()
        var logged: [String] = []
        _ = clock.read(wall: Self.at("2026-03-27T07:00:00Z"), monotonic: 10_000) { logged.append($0) }
        // Ten seconds of wall in ten seconds of monotonic time: no step.
        _ = clock.read(wall: Self.at("2026-03-27T07:00:10Z"), monotonic: 20_000) { logged.append($0) }
        #expect(logged.isEmpty)
        #expect(clock.read(wall: Self.at("2026-03-27T08:00:10Z"), monotonic: 20_100) { logged.append($0) } == Self.at("2026-03-27T08:00:10Z"))
        #expect(logged.count == 1 && logged[0].hasPrefix("warning: the wall clock jumped forward 3600 s"))
    }

    @Test func holdingAtLeastMovesTheManualClockOrHoldsSystemTime() {
        var manual = EngineClock(manual: Self.at("2026-01-01T00:00:00Z"))
        manual.holdAtLeast(Self.at("2026-02-01T00:00:00Z"))
        manual.holdAtLeast(Self.at("2025-01-01T00:00:00Z"))
        #expect(manual.manual == Self.at("2026-02-01T00:00:00Z"))
        var system = EngineClock()
        system.holdAtLeast(Self.at("2026-02-01T00:00:00Z"))
        #expect(system.manual == nil)
        #expect(system.read(wall: Self.at("2026-01-31T00:00:00Z"), monotonic: 0) { _ in } == Self.at("2026-02-01T00:00:00Z"))
    }
}
