// Where a burst of timer firings spends its time: monotonic clock sums per phase, reported by `stats`.
import Glibc
import HeraldCore

/// Cumulative time and counts of the phases a fired timer's deliveries go through: the engine's
/// decision, encoding the stored row, the append until its COMMIT, building the wire lines, and
/// consumers' catch-up reads. A few clock reads per fired user (tens of nanoseconds, small
/// against the work they measure); `herald bench storm` prints them after the storm.
struct FiringPhases {
    /// Users fired, loop turns that fired some, and the loop time they took in all.
    var usersFired = 0
    var slices = 0
    var sliceNanoseconds: Int64 = 0
    /// Inside the slices: `Engine.advance` alone, and `take` (the stored rows' encoding).
    var engineNanoseconds: Int64 = 0
    var encodeNanoseconds: Int64 = 0
    /// Monotonic instants of the first and last slice, and of the last delivery append committed.
    var firstSliceAt: Int64 = 0
    var lastSliceAt: Int64 = 0
    var lastCommitAt: Int64 = 0
    /// Delivery appends: how many, their rows, and the time from handing each to the writer to its
    /// completion (the writer's queue, PostgreSQL, the COMMIT and its reply); time with none in flight.
    var appends = 0
    var appendRows = 0
    var appendNanoseconds: Int64 = 0
    /// The completion's own loop time: wire lines into the ring, waiters, `publish` (consumers).
    var completionNanoseconds: Int64 = 0
    /// Consumers' catch-up reads from PostgreSQL: queries, rows sent from them, and their latency.
    var catchUpReads = 0
    var catchUpRows = 0
    var catchUpNanoseconds: Int64 = 0
    /// WAL writer nudges committed while chained appends were in flight (`startWALNudges`).
    var walNudges = 0
    /// A nudge sent and not yet answered: it may still add to `walNudges` after the burst's last
    /// append committed (a test waits for it before it compares counts).
    var walNudgeInFlight = false

    static func now() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }

    /// The counters as a JSON object (milliseconds, rounded), for `stats`.
    var json: JSONValue {
        func ms(_ ns: Int64) -> JSONValue { .int((ns + 500_000) / 1_000_000) }
        return .object([
            "usersFired": .int(Int64(usersFired)),
            "slices": .int(Int64(slices)),
            "sliceMs": ms(sliceNanoseconds),
            "engineMs": ms(engineNanoseconds),
            "encodeMs": ms(encodeNanoseconds),
            "firstToLastSliceMs": ms(lastSliceAt - firstSliceAt),
            "firstSliceToLastCommitMs": ms(lastCommitAt - firstSliceAt),
            "appends": .int(Int64(appends)),
            "appendRows": .int(Int64(appendRows)),
            "appendMs": ms(appendNanoseconds),
            "completionMs": ms(completionNanoseconds),
            "catchUpReads": .int(Int64(catchUpReads)),
            "catchUpRows": .int(Int64(catchUpRows)),
            "catchUpMs": ms(catchUpNanoseconds),
            "walNudges": .int(Int64(walNudges)),
            "walNudgeInFlight": .bool(walNudgeInFlight),
        ])
    }
}
