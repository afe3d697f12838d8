// Engine time: the manual clock, or the wall clock never allowed to go backwards, with its steps noticed.
import HeraldCore

/// The service's idea of now. Pure: the wall-clock and monotonic readings are given to it.
///
/// On the system clock, engine time never goes back: after a backward step of the wall clock it
/// holds until the wall clock passes it again (no timer fires meanwhile); after a forward step,
/// timers whose instants were skipped fire at once, each with its own instant as `at` (they are
/// due by the clock now in force). Steps of more than a second are logged (docs/hostile-input.md).
struct EngineClock {
    /// The manual clock's instant (`--clock manual`, moved by the `clock` op); nil on the system clock.
    var manual: Instant?
    /// Engine time as last read from the wall clock (system clock).
    private(set) var latest = Instant.epoch
    /// The last wall-clock reading and the monotonic time it was taken at: a step of the wall
    /// clock (NTP, an operator) shows as a difference between the two.
    private var lastWall: (wall: Int64, monotonic: Int64)?
    /// The wall clock is more than a second behind engine time (warned once, until it catches up).
    private(set) var wallClockBehind = false

    init(manual: Instant? = nil) { self.manual = manual }

    /// Engine time on the system clock, from a wall-clock reading taken at `monotonic`
    /// milliseconds; notices of a step of the wall clock go to `log`.
    mutating func read(wall: Instant, monotonic: Int64, log: (String) -> Void) -> Instant {
        noteStep(wall, monotonic: monotonic, log: log)
        latest = max(latest, wall)
        return latest
    }

    /// Engine time does not go back behind `instant` (a rules version's take-over): the manual
    /// clock moves up to it, or the system clock's engine time holds there until the wall passes it.
    mutating func holdAtLeast(_ instant: Instant) {
        if let m = manual { manual = max(m, instant) } else { latest = max(latest, instant) }
    }

    private mutating func noteStep(_ wall: Instant, monotonic mono: Int64, log: (String) -> Void) {
        defer { lastWall = (wall.millisecondsSinceEpoch, mono) }
        guard let last = lastWall else { return }
        let drift = (wall.millisecondsSinceEpoch - last.wall) - (mono - last.monotonic)
        if wall < latest {
            if !wallClockBehind && latest.millisecondsSinceEpoch - wall.millisecondsSinceEpoch > 1000 {
                wallClockBehind = true
                log("warning: the wall clock went back to \(wall.rfc3339), \((latest.millisecondsSinceEpoch - wall.millisecondsSinceEpoch + 500) / 1000) s behind engine time; engine time holds at \(latest.rfc3339) until the wall clock passes it (no timer fires early)")
            }
            return
        }
        if wallClockBehind {
            wallClockBehind = false
            log("notice: the wall clock caught up with engine time at \(wall.rfc3339)")
        }
        if drift > 1000 {
            log("warning: the wall clock jumped forward \((drift + 500) / 1000) s to \(wall.rfc3339); timers due in the skipped interval fire now, each with its own instant")
        }
    }
}
