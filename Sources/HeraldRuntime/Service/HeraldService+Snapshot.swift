// Periodic snapshots of every user's state, captured a slice per loop turn and stored on the loop by SnapshotLink.
import HeraldCore
import HeraldStore

/// The service's restart-related state (one stored property of `HeraldService`): the
/// snapshot capture in progress, its writer, and the loading of lean pending items' content (docs/restart.md).
final class RestartState {
    var writer: SnapshotLink?
    /// Checks once a second whether enough events were folded since the last snapshot.
    var checkTimer: LoopEvent?
    /// Runs the next capture slice (zero delay, re-armed while a capture runs).
    var sliceTimer: LoopEvent?
    /// `eventsCommitted` when the last snapshot began (the start-up fold counts too).
    var eventsAtLastSnapshot = 0
    /// A snapshot is due now, whatever the interval says (an erasure on a retained partition).
    var snapshotWanted = false
    var capture: Capture?
    /// The final snapshot at shutdown: the writer's completed and failed counts it waits to pass, and its deadline.
    var shutdownSnapshot: (completed: Int, failed: Int, deadline: Int64)?
    var shutdownSnapshotDone = false
    /// Reading lean deferred items' content back when they come due (HeraldService+Content).
    let content = ContentLoading()
    /// Deferred content further than this ahead is left in `events` (start-up and snapshots).
    static let keepContentAheadMilliseconds: Int64 = 60_000

    struct Capture {
        var userCount: Int
        var cursor = 0
        var part = SnapshotPart()
        var partIndex = 0
        var bytes = 0
        /// One user's record before its length is known (`UserState.encodeSnapshotRecord`).
        var scratch = SnapshotWriter(capacity: 512)
    }
}

/// The part being filled during a capture: room for a whole part from the start (growing from
/// 1 MB would copy 3 MB a part on the way to its 4 MB).
struct SnapshotPart {
    var writer = SnapshotWriter(capacity: HeraldService.snapshotPartBytes + (64 << 10))
    var users = 0
}

extension HeraldService {
    /// Users encoded per loop turn while capturing: a few milliseconds of loop time.
    nonisolated(unsafe) static var snapshotSliceUsers = 2_000  // tests lower it to interleave capture with events
    /// A part is handed to the writer at this size.
    static let snapshotPartBytes = 4 << 20
    /// Capture pauses while the writer has this much queued.
    static let snapshotQueueBytes = 32 << 20

    /// Arms the periodic check (after start-up; `configuration.snapshotEveryEvents` nil: never).
    func startSnapshots() {
        guard let every = configuration.snapshotEveryEvents, every > 0 else { return }
        restart.writer = SnapshotLink(loop: loop, url: configuration.databaseURL) { [unretained] in unretained.object?.log($0) }
        restart.writer?.partition = partition
        restart.sliceTimer = loop.timer { [unretained] in unretained.object?.captureSlice() }
        restart.checkTimer = loop.timer { [unretained] in
            guard let self = unretained.object else { return }
            self.maybeBeginSnapshot()
            self.restart.checkTimer?.arm(afterMilliseconds: 1_000)
        }
        restart.checkTimer?.arm(afterMilliseconds: 0)
    }

    func stopSnapshots() {
        restart.writer?.stop()
    }

    func maybeBeginSnapshot() {
        guard let every = configuration.snapshotEveryEvents, restart.capture == nil,
              restart.snapshotWanted || eventsCommitted - restart.eventsAtLastSnapshot >= Self.snapshotInterval(every: every, users: users.count,
                                                                                     eventsPerUser: configuration.snapshotEventsPerUser),
              restart.writer?.isBusy == false, lifecycle.isServing else { return }
        beginSnapshot()
    }

    /// Events between snapshots: `every`, or `eventsPerUser` per user when that is more (a
    /// capture costs per user, so the interval grows with the users; `snapshotEventsPerUser`).
    static func snapshotInterval(every: Int, users: Int, eventsPerUser: Int) -> Int {
        let (perUser, overflow) = users.multipliedReportingOverflow(by: max(0, eventsPerUser))
        return overflow ? Int.max : max(every, perUser)
    }

    /// Starts a capture at the current position (`lastFoldedSeq`): the header now, the users a slice per turn.
    func beginSnapshot() {
        guard let writer = restart.writer, restart.capture == nil else { return }
        restart.eventsAtLastSnapshot = eventsCommitted
        restart.snapshotWanted = false
        var header = SnapshotWriter()
        SnapshotHeader(capturedAt: now(), apps: apps).encode(to: &header)
        writer.enqueue(.begin(throughSeq: lastFoldedSeq, header: header.bytes))
        restart.capture = RestartState.Capture(userCount: users.count)
        restart.sliceTimer?.arm(afterMilliseconds: 0)
    }

    /// Encodes the next slice of users at the current position; at the end, completes the
    /// snapshot once every delivery decided so far is committed (a snapshot must never hold a
    /// state whose deliveries could be lost: restore would not re-derive them).
    func captureSlice() {
        guard restart.capture != nil, let writer = restart.writer else { return }
        if writer.queuedBytes > Self.snapshotQueueBytes {
            restart.sliceTimer?.arm(afterMilliseconds: 5)
            return
        }
        // Taken out, not copied: a copy left in `restart` would share the part's buffer, and the
        // first write below would copy all of it (up to 4 MB) every slice.
        var c = restart.capture.take()!
        let end = min(c.userCount, c.cursor + Self.snapshotSliceUsers)
        users.withUnsafeBufferPointer { records in
            while c.cursor < end {
                Self.encodeRecord(at: records.baseAddress! + c.cursor, to: &c.part.writer, scratch: &c.scratch)
                c.part.users += 1
                c.cursor += 1
            }
        }
        if c.part.writer.bytes.count >= Self.snapshotPartBytes || (c.cursor == c.userCount && c.part.users > 0) {
            c.bytes += c.part.writer.bytes.count
            writer.enqueue(.part(index: c.partIndex, users: c.part.users, data: c.part.writer.bytes))
            c.partIndex += 1
            c.part = SnapshotPart()
        }
        if c.cursor < c.userCount {
            restart.capture = c
            restart.sliceTimer?.arm(afterMilliseconds: 0)
            return
        }
        restart.capture = nil
        let (count, parts, bytes) = (c.userCount, c.partIndex, c.bytes)
        flushDeliveries {
            writer.enqueue(.complete(users: count, parts: parts, bytes: bytes))
        }
    }

    /// One step of the final snapshot at shutdown (called after the drain, connections closed):
    /// waits for a capture in progress, then captures and stores every user once more if events
    /// were folded since the last snapshot began. Returns true while there is more to wait for.
    func shutdownSnapshotStep() -> Bool {
        guard configuration.snapshotAtShutdown, let writer = restart.writer, !restart.shutdownSnapshotDone else { return false }
        let nowMs = ClientConnection.monotonicMilliseconds()
        if let started = restart.shutdownSnapshot {
            if writer.completed > started.completed {
                log("shutting down: final snapshot written; the next start folds nothing before serving")
            } else if writer.failed > started.failed {
                log("shutting down without a final snapshot: it could not be stored; the next start folds the events after the previous one")
            } else if nowMs > started.deadline {
                log("shutting down without a final snapshot: not stored within \(configuration.shutdownSnapshotMilliseconds) ms "
                    + "(the unfinished one is ignored); the next start folds the events after the previous one")
            } else {
                return true
            }
            restart.shutdownSnapshotDone = true
            return false
        }
        // A periodic snapshot still being captured or stored: let it finish first.
        if restart.capture != nil || writer.isBusy { return true }
        guard eventsCommitted > restart.eventsAtLastSnapshot else {
            restart.shutdownSnapshotDone = true  // nothing folded since the last snapshot began
            return false
        }
        restart.shutdownSnapshot = (writer.completed, writer.failed, nowMs + configuration.shutdownSnapshotMilliseconds)
        log("shutting down: writing a final snapshot of \(users.count) users through seq \(lastFoldedSeq)")
        beginSnapshot()
        return true
    }

    /// One user in a snapshot part: its byte length, the state, and the runtime's delivery ordinal.
    /// The record is read where it lies (`users[i]` passed along would copy it, every buffer of the
    /// user's state retained and released); `scratch` is reused from user to user.
    static func encodeRecord(at record: UnsafePointer<UserRecord>, to w: inout SnapshotWriter, scratch: inout SnapshotWriter) {
        let state = (UnsafeRawPointer(record) + Self.stateOffset).assumingMemoryBound(to: UserState.self)
        UserState.encodeSnapshotRecord(at: state, deliveryCount: record.pointee.deliveryCount, to: &w, scratch: &scratch)
    }

    private static let stateOffset = MemoryLayout<UserRecord>.offset(of: \UserRecord.state)!
}
