// During a burst of delivery appends, PostgreSQL's WAL writer is woken to flush what they have written so far.

extension HeraldService {
    /// While chained (burst) appends are in flight, every `walNudgeMilliseconds` a one-statement
    /// transaction with an asynchronous commit on the read connection wakes PostgreSQL's WAL
    /// writer, which then writes and flushes all WAL up to it — the appends' rows stored so far —
    /// so each append's COMMIT flushes only its last part. (The WAL writer otherwise sleeps
    /// 200 ms, through a whole burst; a shorter `wal_writer_delay` would do the same but for
    /// every commit of the server, at the cost of the steady load's commit tail.)
    func startWALNudges() {
        guard configuration.walNudgeMilliseconds > 0, walNudgeTimer == nil else { return }
        walNudgeTimer = loop.timer { [unretained] in unretained.object?.nudgeWAL() }
        walNudgeTimer?.arm(afterMilliseconds: configuration.walNudgeMilliseconds)
    }

    private func nudgeWAL() {
        guard deliveryAppends.pending.contains(where: { $0.base != nil }) else { walNudgeTimer = nil; return }
        if !phases.walNudgeInFlight {
            phases.walNudgeInFlight = true
            // `set_config(…, true)`: for this transaction only, whose commit it decides.
            reader.query("SELECT set_config('synchronous_commit', 'off', true), pg_current_xact_id()", []) { [unretained] result in
                unretained.object?.phases.walNudgeInFlight = false
                if case .success = result { unretained.object?.phases.walNudges += 1 }
            }
        }
        walNudgeTimer?.arm(afterMilliseconds: configuration.walNudgeMilliseconds)
    }
}
