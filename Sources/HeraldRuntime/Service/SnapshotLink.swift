// Stores snapshots on the loop: a non-blocking connection of their own (SnapshotUpload), connected without blocking, jobs in order.
import CLibEvent
import DequeModule
import HeraldStore

/// The loop encodes a slice of users per turn and hands full parts here; parts are stored by
/// binary COPY fed a slice at a time as the socket allows (`SnapshotUpload`), so the loop never
/// waits for PostgreSQL and never copies more than a few slices per turn. Jobs run in order:
/// begin, parts, complete. A job that fails gives the snapshot up: its later parts and its
/// completion are dropped, the incomplete row is deleted before the next snapshot begins (and
/// is never read by restore). The connection is opened when a snapshot begins and kept; a lost
/// one is reopened for the next snapshot.
final class SnapshotLink {
    enum Job {
        case begin(throughSeq: Int64, header: [UInt8])
        case part(index: Int, users: Int, data: [UInt8])
        case complete(users: Int, parts: Int, bytes: Int)
    }

    private let loop: EventLoop
    private let url: String
    private let log: (String) -> Void
    private var jobs: Deque<Job> = []
    private var upload: SnapshotUpload?
    private var connector: LoopConnector?
    private var readWatch: LoopEvent?
    private var writeWatch: LoopEvent?
    /// A job started on the upload and not finished.
    private var running = false
    private var currentId: Int64?
    private var currentFailed = false
    /// A snapshot given up: deleted before the next one begins.
    private var staleId: Int64?
    private var stopped = false
    /// Bytes of parts handed over and not yet stored: the loop pauses capture above a bound.
    private(set) var queuedBytes = 0
    /// Snapshots completed, and given up (stats, shutdown, tests).
    private(set) var completed = 0
    private(set) var failed = 0
    /// When the last snapshot completed (wall clock, seconds since 1970; metrics).
    private(set) var lastCompletedAt: Double?

    /// The partition whose snapshots are written.
    var partition = 0

    init(loop: EventLoop, url: String, log: @escaping (String) -> Void) {
        self.loop = loop
        self.url = url
        self.log = log
    }

    /// A snapshot is being written (jobs queued or running, or its connection being made).
    var isBusy: Bool { running || !jobs.isEmpty || connector != nil }

    func enqueue(_ job: Job) {
        guard !stopped else { return }
        if case .part(_, _, let data) = job { queuedBytes += data.count }
        jobs.append(job)
        pump()
    }

    /// Drops queued jobs and the connection (an unfinished snapshot is ignored by restore).
    func stop() {
        stopped = true
        jobs.removeAll()
        queuedBytes = 0
        readWatch = nil
        writeWatch = nil
        upload?.close()
        upload = nil
        connector = nil
    }

    private func pump() {
        while !stopped, !running, let job = jobs.first {
            // The rest of a snapshot given up is dropped until the next one begins.
            if currentFailed, !job.isBegin {
                drop()
                continue
            }
            guard let upload, upload.failure == nil else { connect(); return }
            let uploadJob: SnapshotUpload.Job
            switch job {
            case .begin(let through, let header):
                if let stale = staleId {
                    staleId = nil
                    running = true
                    upload.start(.abandon(snapshotId: stale)) { [weak self] _ in
                        self?.running = false
                        self?.pump()
                    }
                    afterIO()
                    return
                }
                uploadJob = .begin(throughSeq: through, header: header)
            case .part(let index, let users, let data):
                guard let id = currentId else { drop(); continue }
                uploadJob = .part(snapshotId: id, index: index, users: users, data: data)
            case .complete(let users, let parts, let bytes):
                guard let id = currentId else { drop(); continue }
                uploadJob = .complete(snapshotId: id, users: users, parts: parts, bytes: bytes)
            }
            running = true
            upload.start(uploadJob) { [weak self] result in self?.jobDone(job, result) }
            afterIO()
        }
    }

    /// Removes the job at the head of the queue.
    private func drop() {
        if case .part(_, _, let data)? = jobs.popFirst() { queuedBytes -= data.count }
    }

    private func jobDone(_ job: Job, _ result: Result<Int64, StoreError>) {
        running = false
        drop()
        switch result {
        case .success(let value):
            switch job {
            case .begin:
                currentId = value
                currentFailed = false
            case .part:
                break
            case .complete(let users, let parts, let bytes):
                completed += 1
                lastCompletedAt = Double(WheelDriver.systemNow().millisecondsSinceEpoch) / 1000
                log("snapshot \(currentId ?? 0) complete: \(users) users, \(parts) parts, \(bytes / 1024) KiB")
                currentId = nil
            }
        case .failure(let error):
            if !currentFailed {
                failed += 1
                log("warning: snapshot not written (\(error)); start-up folds from the previous snapshot until the next one completes")
            }
            currentFailed = true
            if let id = currentId { staleId = id }
            currentId = nil
            if upload?.failure != nil { retire() }
        }
        pump()
    }

    private func retire() {
        readWatch = nil
        writeWatch = nil
        upload?.close()
        upload = nil
    }

    /// Opens the connection without blocking; the queued jobs then run. If it cannot be opened,
    /// the snapshot in the queue is given up (the periodic check begins another later).
    private func connect() {
        guard connector == nil else { return }
        var finished = false  // the connector may finish inside its init
        let attempt = LoopConnector(loop: loop, url: url) { [weak self] result in
            finished = true
            guard let self else { return }
            self.connector = nil
            guard !self.stopped else { return }
            do {
                let upload = try SnapshotUpload(connection: result.get())
                upload.partition = self.partition
                self.install(upload)
            } catch {
                if !self.currentFailed {
                    self.failed += 1
                    self.log("warning: snapshot not written (could not connect: \(error)); start-up folds from the previous snapshot until the next one completes")
                }
                // Nothing of the queued snapshot can be stored: give it up whole.
                self.currentFailed = true
                if let id = self.currentId { self.staleId = id }
                self.currentId = nil
                while !self.jobs.isEmpty { self.drop() }
                return
            }
            self.pump()
        }
        if !finished { connector = attempt }
    }

    private func install(_ u: SnapshotUpload) {
        upload = u
        readWatch = loop.watch(fd: u.socket, flags: Int32(EV_READ | EV_PERSIST)) { [weak self] _ in
            guard let self, let u = self.upload else { return }
            u.socketReadable()
            self.afterIO()
        }
        readWatch?.arm()
        writeWatch = loop.watch(fd: u.socket, flags: Int32(EV_WRITE)) { [weak self] _ in
            guard let self, let u = self.upload else { return }
            u.socketWritable()
            self.afterIO()
        }
    }

    private func afterIO() {
        guard let u = upload else { return }
        if u.failure != nil {
            // Lost between jobs (or the failed job already reported): the next job reconnects.
            retire()
            return
        }
        if u.wantsWrite && !(writeWatch?.isArmed ?? false) { writeWatch?.arm() }
    }
}

extension SnapshotLink.Job {
    var isBegin: Bool { if case .begin = self { return true } else { return false } }
}
