// The first step of the storm, restart and replay benchmarks: a large history written by COPY.
import HeraldCommandLine
import HeraldCore
import HeraldTestSupport

/// What building a synthetic history wrote, and how long it took.
struct SyntheticLog {
    var seconds: Double
    var events: Int
    var deliveries: Int
    /// Of `seconds`: the COPY of the rows, and moving them into the log (+ ANALYZE).
    var copySeconds: Double
    var finishSeconds: Double

    /// Writes the app's registration, then `users` users' requests (`requests(u)`, at `time(u)`),
    /// through `SyntheticHistory` into the database at `url`, with a progress bar labelled `label`.
    static func build(url: String, label: String, users: Int, start: Instant,
                      time: (Int) -> Instant, requests: (Int) -> [(op: String, body: JSONValue)],
                      each: ((UserState, Int64, SyntheticHistory) throws -> Void)? = nil) throws -> SyntheticLog {
        let watch = Stopwatch()
        let history = try SyntheticHistory(databaseURL: url)
        defer { history.connection.close() }
        let bar = ProgressBar(label, total: users)
        try history.global(SyntheticWorkloads.registerApp().op, SyntheticWorkloads.registerApp().body, at: start)
        for u in 0..<users {
            let state = try history.user("user-\(u)", requests(u), at: time(u))
            try each?(state, history.lastUserDeliveries, history)
            if u % 1000 == 0 { bar.update(u) }
        }
        bar.update(users); bar.finish()
        Log.info("\(label): moving \(history.eventsWritten) events into the log")
        try history.finish()
        return SyntheticLog(seconds: watch.seconds, events: history.eventsWritten, deliveries: history.deliveriesWritten,
                            copySeconds: history.copySeconds, finishSeconds: history.finishSeconds)
    }
}
