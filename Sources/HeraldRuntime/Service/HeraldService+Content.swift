// Lean pending items' content read back from `events` on the loop without blocking: decisions wait for it, in order.
import DequeModule
import HeraldCore
import HeraldStore

/// The loop's side of lean content (docs/restart.md, "Loading content when due"). A lean deferred
/// item keeps only its key and deadline in memory; its notification stays in `events` until the
/// item comes due. Then the decision waits — it is neither made without the notification nor
/// dropped — until an asynchronous read (`AsyncReader`) brings the content back:
/// - a due user's timers wait in `dueUsers` (the slice is not fired);
/// - a committed event whose user has a lean item due by the event's time waits in `heldFolds`,
///   and every event committed after it waits behind it, so events still fold in seq order
///   (`lastFoldedSeq`, snapshots) and timers never fire past an event not yet folded.
/// While PostgreSQL cannot be read, reads are retried with back-off (up to 5 s) and the outage is
/// logged once when it starts and once when it ends.
final class ContentLoading {
    /// Committed events not yet folded, in seq order: the first waits for content, the rest behind it.
    var heldFolds: Deque<StoredEvent> = []
    /// Run, in order, once `heldFolds` is empty (the clock op fires its timers then).
    var afterHeldFolds: [() -> Void] = []
    /// Seqs of submits to read → the ordinal of the user whose pending item it is.
    var wanted: [Int64: Int] = [:]
    var readInFlight = false
    var retry: LoopEvent?
    var backoffMilliseconds: Int64 = 100
    /// Monotonic milliseconds when reads started failing (nil: the last read worked), and how many failed since.
    var failingSince: Int64?
    var failures = 0
    /// Reads done and rows supplied (stats, tests).
    var reads = 0
    var rowsRead = 0
    /// The most seqs in one read (a bigint[] parameter of ~200 KB).
    static let readLimit = 10_000
}

extension HeraldService {
    /// True when every lean item of the user due at or before `t` has its content; otherwise asks
    /// for it (asynchronously) and returns false: the caller waits.
    func contentReady(ordinal: Int, upTo t: Instant) -> Bool {
        let missing = users[ordinal].state.contentNeededInPlace(upTo: t)
        if missing.isEmpty { return true }
        for seq in missing { restart.content.wanted[seq] = ordinal }
        readContent()
        return false
    }

    /// True unless `snooze` names a notification whose content the user's state no longer keeps
    /// (`contentNeeded(toApply:)`); then asks for it like lean content and returns false. Only
    /// for snooze events: passing every event here as an optional would copy it on every submit.
    func snoozedContentReady(ordinal: Int, snooze: StoredEvent) -> Bool {
        guard let seq = users[ordinal].state.contentNeeded(toApply: snooze) else { return true }
        restart.content.wanted[seq] = ordinal
        readContent()
        return false
    }

    /// True when the first due user's lean content is in memory, so the slice can fire that user.
    /// Otherwise the content is asked for — for that user and every one of the next slice's worth
    /// of due users missing some, in one read — and the slice stops there (`contentArrived` fires
    /// it again). Checked user by user as the slice reaches them: a slice bounded in time fires
    /// only some tens of users, so checking a whole slice's worth (2,000 users) before every slice
    /// would mostly be wasted.
    func nextDueUserContentReady() -> Bool {
        guard let (ordinal, horizon) = dueUsers.first, Int(ordinal) < users.count,
              !users[Int(ordinal)].state.contentNeededInPlace(upTo: horizon).isEmpty else { return true }
        for (ordinal, horizon) in dueUsers.queue.prefix(configuration.timerSliceUsers) where Int(ordinal) < users.count {
            let o = Int(ordinal)
            for seq in users[o].state.contentNeededInPlace(upTo: horizon) { restart.content.wanted[seq] = o }
        }
        readContent()
        return false
    }

    /// Queues a committed event behind the one waiting for content (see `ContentLoading`).
    func holdFold(_ event: StoredEvent) {
        restart.content.heldFolds.append(event)
    }

    /// Runs `action` once every event committed so far has folded: now, unless some wait for content.
    func afterHeldFolds(_ action: @escaping () -> Void) {
        if restart.content.heldFolds.isEmpty { action() } else { restart.content.afterHeldFolds.append(action) }
    }

    /// The highest seq committed and known to this process: folded, or waiting to fold.
    var lastCommittedSeq: Int64 { max(lastFoldedSeq, restart.content.heldFolds.last?.seq ?? 0) }

    /// Sends the next read of wanted content, unless one is in flight or a retry is armed.
    func readContent() {
        let c = restart.content
        guard !c.readInFlight, !(c.retry?.isArmed ?? false), !c.wanted.isEmpty else { return }
        let seqs = Array(c.wanted.keys.prefix(ContentLoading.readLimit))
        var list = "{"
        for (i, seq) in seqs.enumerated() {
            if i > 0 { list += "," }
            list += String(seq)
        }
        list += "}"
        c.readInFlight = true
        // `body` is `text`: the stored canonical bytes, unchanged.
        reader.query("SELECT seq, body FROM herald_bodies($2, $1::bigint[])", [list, String(partition)]) { [unretained] result in
            unretained.object?.contentRead(seqs, result)
        }
    }

    private func contentRead(_ seqs: [Int64], _ result: Result<PGResult, StoreError>) {
        let c = restart.content
        c.readInFlight = false
        var failure: String?
        switch result {
        case .failure(let error):
            failure = "\(error)"
        case .success(let r):
            var supplied = 0
            for i in 0..<r.rowCount {
                guard let seq = r.int64(i, 0), let o = c.wanted.removeValue(forKey: seq), let body = r.bytes(i, 1) else { continue }
                let n = readableBody(body, user: users[o].state.user).withUnsafeBytes { SubmittedNotification(canonicalBody: $0) }
                users[o].state.supplyContent(n, seq: seq)
                supplied += 1
            }
            c.reads += 1
            c.rowsRead += supplied
            let absent = seqs.filter { c.wanted[$0] != nil }
            if !absent.isEmpty {
                // Events are immutable (triggers): a missing submit means the log was changed behind Herald's back.
                failure = "\(absent.count) submitted notification(s) are not in events (seq \(absent.prefix(5).map(String.init).joined(separator: ", "))); the log was altered outside Herald"
            }
        }
        if let failure {
            c.failures += 1
            if c.failingSince == nil {
                c.failingSince = ClientConnection.monotonicMilliseconds()
                log("warning: could not read the content of \(c.wanted.count) pending notification(s) now due from PostgreSQL (\(failure)); "
                    + "their decisions wait — not fired, not lost, in order — and the read is retried every few seconds; "
                    + "events and timers of the users involved wait behind them. Check that PostgreSQL is reachable.")
            } else if c.failures % 20 == 0 {
                log("warning: still cannot read pending notifications' content (\(c.failures) attempts, \(failure)); \(c.wanted.count) decision(s) waiting")
            }
            if c.retry == nil { c.retry = loop.timer { [unretained] in unretained.object?.readContent() } }
            c.retry?.arm(afterMilliseconds: c.backoffMilliseconds)
            c.backoffMilliseconds = min(c.backoffMilliseconds * 2, 5_000)
            return
        }
        if let since = c.failingSince {
            log("notice: pending notifications' content read again after \(c.failures) failed attempt(s) over "
                + "\((ClientConnection.monotonicMilliseconds() - since + 500) / 1000) s; the waiting decisions are made now")
            c.failingSince = nil
            c.failures = 0
        }
        c.backoffMilliseconds = 100
        contentArrived()
        readContent()
    }

    /// Folds the events that waited for content (in seq order, stopping at the next one whose
    /// content is still missing), then lets the waiting timer slices fire.
    func contentArrived() {
        let c = restart.content
        while let event = c.heldFolds.first {
            guard fold(event) else { break }
            c.heldFolds.removeFirst()
        }
        if c.heldFolds.isEmpty && !c.afterHeldFolds.isEmpty {
            let actions = c.afterHeldFolds
            c.afterHeldFolds.removeAll()
            for action in actions { action() }
        }
        flushDeliveries()
        fireTimersSoon()
    }
}

extension UserState {
    /// `contentNeeded(upTo:)` through an `inout` access, for a state inside the service's
    /// `users` array: read through the class's property, the non-mutating call would copy the
    /// whole user record first (retaining each of its references) on every event. Mutates nothing.
    mutating func contentNeededInPlace(upTo t: Instant) -> [Int64] {
        contentNeeded(upTo: t)
    }
}
