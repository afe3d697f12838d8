// The timing wheel on the libevent loop: exactly one libevent timer, armed for the wheel's next deadline.
import Glibc
import HeraldCore

/// Drives a `TimingWheel` from the loop. The loop sleeps until the wheel's earliest deadline
/// (no periodic tick, no wake-ups for empty ticks); when the timer fires, `onDue` runs and the
/// timer is re-armed for the new earliest deadline. Under a manual clock nothing is armed:
/// time moves only when the owner calls `fire()`.
public final class WheelDriver {
    public var wheel: TimingWheel
    private var timer: LoopEvent?
    private let now: () -> Instant
    private let armsTimer: Bool
    /// Called when the armed timer fires (the owner advances the wheel, usually via `advance`).
    public var onTimer: () -> Void = {}
    /// How many times the loop woke up for the wheel (observability, and the runtime test).
    public private(set) var wakeups = 0

    /// `systemClock` false: a manual clock; no libevent timer is ever armed. `now` is the wall
    /// clock the deadlines are measured against (after a backward step the timer sleeps until
    /// the wall clock reaches the deadline, instead of waking again and again).
    public init(loop: EventLoop, start: Instant, systemClock: Bool, now: @escaping () -> Instant) {
        self.wheel = TimingWheel(start: start)
        self.now = now
        self.armsTimer = systemClock
        self.timer = nil
        self.timer = loop.timer { [weak self] in
            guard let self else { return }
            self.wakeups += 1
            self.onTimer()
        }
    }

    /// Fires everything due at or before `horizon`, in deadline order, then re-arms.
    public func advance(to horizon: Instant, _ body: (Instant, UInt64) -> Void) {
        wheel.advance(to: horizon, body)
        rearm()
    }

    /// The longest the armed timer sleeps: libevent measures delays on the monotonic clock, so
    /// after a forward step of the wall clock the wheel notices newly due timers within this.
    public static let maxSleepMilliseconds: Int64 = 60_000

    /// Arms the one timer for the earliest deadline (rounded up to the next millisecond, so never
    /// early), at most `maxSleepMilliseconds` ahead.
    public func rearm() {
        guard armsTimer, let next = wheel.nextDeadline else { timer?.disarm(); return }
        let delay = min(max(0, next.millisecondsSinceEpoch - now().millisecondsSinceEpoch), Self.maxSleepMilliseconds)
        timer?.disarm()
        timer?.arm(afterMilliseconds: delay)
    }

    /// The wall clock as engine time (CLOCK_REALTIME, milliseconds).
    public static func systemNow() -> Instant {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Instant(millisecondsSinceEpoch: Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000)
    }
}
