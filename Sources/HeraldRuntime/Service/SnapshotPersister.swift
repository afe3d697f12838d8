// A thread with its own blocking PostgreSQL connection that stores snapshot parts while the loop keeps serving.
import Glibc
import HeraldCore
import HeraldStore

/// Jobs run in order on one thread with one connection: begin, parts, complete. The loop
/// thread only encodes (a slice of users per turn) and hands bytes over; the COPY of a
/// multi-MB part never blocks it. A job that fails marks the snapshot failed: its later parts
/// and its completion are dropped (the incomplete row is ignored by restore and deleted by
/// the next snapshot's completion).
final class SnapshotPersister: @unchecked Sendable {
    // Why @unchecked Sendable: `jobs`, `queuedBytes`, `busy` and `failed` are touched only
    // while holding `mutex`; `connection` only by the writer thread.
    enum Job {
        case begin(throughSeq: Int64, header: [UInt8])
        case part(index: Int, users: Int, data: [UInt8])
        case complete(users: Int, parts: Int, bytes: Int)
        case stop
    }

    private var mutex = pthread_mutex_t()
    private var condition = pthread_cond_t()
    private var jobs: [Job] = []
    private var queuedBytesValue = 0
    private var busyValue = false
    private var thread: pthread_t?
    private let url: String
    private let log: @Sendable (String) -> Void
    private var connection: PGConnection?
    private var currentId: Int64?
    private var currentFailed = false
    /// Snapshots completed by this writer (for stats and tests).
    private var completedValue = 0
    /// Snapshots given up after a failed job.
    private var failedValue = 0

    init(url: String, log: @escaping @Sendable (String) -> Void) {
        self.url = url
        self.log = log
        pthread_mutex_init(&mutex, nil)
        pthread_cond_init(&condition, nil)
    }

    deinit {
        pthread_cond_destroy(&condition)
        pthread_mutex_destroy(&mutex)
    }

    private func locked<R>(_ body: () -> R) -> R {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        return body()
    }

    /// Bytes of parts handed over and not yet stored: the loop pauses capture above a bound.
    var queuedBytes: Int { locked { queuedBytesValue } }
    /// A snapshot is being written (jobs queued or running).
    var isBusy: Bool { locked { busyValue || !jobs.isEmpty } }
    var completed: Int { locked { completedValue } }
    var failed: Int { locked { failedValue } }

    func enqueue(_ job: Job) {
        startIfNeeded()
        locked {
            if case .part(_, _, let data) = job { queuedBytesValue += data.count }
            jobs.append(job)
            pthread_cond_signal(&condition)
        }
    }

    /// Stops the thread after the queued jobs (not waited for: an unfinished snapshot is ignored).
    func stop() {
        guard thread != nil else { return }
        enqueue(.stop)
    }

    private func startIfNeeded() {
        guard thread == nil else { return }
        // Why Unmanaged.passRetained: the thread owns one reference until it ends.
        let context = Unmanaged.passRetained(self).toOpaque()
        var t = pthread_t()
        pthread_create(&t, nil, { ctx in
            let writer = Unmanaged<SnapshotPersister>.fromOpaque(ctx!).takeRetainedValue()
            writer.runThread()
            return nil
        }, context)
        pthread_detach(t)
        thread = t
    }

    private func runThread() {
        while true {
            let job: Job = locked {
                while jobs.isEmpty { pthread_cond_wait(&condition, &mutex) }
                busyValue = true
                return jobs.removeFirst()
            }
            if case .stop = job {
                locked { busyValue = false }
                connection?.close()
                return
            }
            run(job)
            locked {
                if case .part(_, _, let data) = job { queuedBytesValue -= data.count }
                busyValue = false
            }
        }
    }

    private func run(_ job: Job) {
        do {
            if connection == nil || connection?.isOpen != true {
                connection = try PGConnection.connect(url)
            }
            let conn = connection!
            switch job {
            case .begin(let through, let header):
                if let stale = currentId, currentFailed { try? SnapshotStore.abandon(conn, id: stale) }
                currentId = try SnapshotStore.begin(conn, throughSeq: through, header: header)
                currentFailed = false
            case .part(let index, let users, let data):
                guard let id = currentId, !currentFailed else { return }
                try SnapshotStore.writeParts(conn, id: id, parts: [(index, users, data)])
            case .complete(let users, let parts, let bytes):
                guard let id = currentId, !currentFailed else { return }
                try SnapshotStore.complete(conn, id: id, users: users, parts: parts, bytes: bytes)
                currentId = nil
                locked { completedValue += 1 }
                log("snapshot \(id) complete: \(users) users, \(parts) parts, \(bytes / 1024) KiB")
            case .stop:
                break
            }
        } catch {
            if !currentFailed { locked { failedValue += 1 } }
            currentFailed = true
            connection?.close()
            connection = nil
            log("snapshot not written (\(error)); start-up folds from the previous snapshot until the next one completes")
        }
    }
}
