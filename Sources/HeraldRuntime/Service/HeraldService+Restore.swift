// Start-up: rebuild every user's state and the timing wheel by folding the stored events.
import HeraldCore
import HeraldStore

extension HeraldService {
    /// Folds the whole log (before serving: blocking reads are fine here). Deliveries the log
    /// implies but the deliveries table lacks — decided before a crash, not yet committed — are
    /// re-derived and queued; already stored ones are recognised by (user, user_index).
    func restore(from conn: PGConnection) throws {
        let started = now()
        var stored: [String: Int64] = [:]
        let r = try conn.execute("SELECT user_id, max(user_index) FROM deliveries GROUP BY user_id")
        for i in 0..<r.rowCount { if let u = r.string(i, 0), let n = r.int64(i, 1) { stored[u] = n } }
        deliveryHead = try conn.execute("SELECT cursor FROM delivery_head").int64(0, 0) ?? 0
        ringFirstCursor = deliveryHead + 1

        var first = true
        var folded = 0
        // One binary COPY in seq order: the server streams while the fold runs.
        let stream = try LogStream(conn, deliveries: false)
        while case .event(let e)? = try stream.next() {
            if first {
                timers.wheel = TimingWheel(start: min(e.engineTime, started))
                first = false
            }
            applyCommitted(e.storedEvent) { d, index in
                if index > stored[d.user, default: 0] { self.unsentDeliveries.append(Self.row(d, index: index)) }
            }
            folded += 1
        }
        if first { timers.wheel = TimingWheel(start: started) }
        // A manual clock resumes where the last run left it: engine time never goes back.
        if let manual = manualNow {
            let last = try conn.execute("SELECT (extract(epoch FROM greatest((SELECT max(engine_time) FROM events), (SELECT max(at) FROM deliveries))) * 1000)::bigint")
            if let ms = last.int64(0, 0) { manualNow = max(manual, Instant(millisecondsSinceEpoch: ms)) }
        }
        eventsCommitted = folded
        log("restored \(folded) events, \(users.count) users, \(timers.wheel.count) timers; \(unsentDeliveries.count) deliveries re-derived")
    }
}
