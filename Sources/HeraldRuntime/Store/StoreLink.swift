// Keeps the store's writer connected on the loop: watches its socket, reconnects with backoff.
import CLibEvent
import CLibPQ
import HeraldStore

/// Drives a `GroupCommitWriter` from libevent. While PostgreSQL is unreachable, requests fail
/// at once with `StoreError.unavailable` (the caller answers `store_unavailable`), and the
/// link reconnects by itself with a non-blocking connect and exponential backoff (up to 5 s).
public final class StoreLink {
    private let loop: EventLoop
    private let url: String
    public private(set) var writer: GroupCommitWriter?
    private var readWatch: LoopEvent?
    private var writeWatch: LoopEvent?
    private var connector: LoopConnector?
    private var retryTimer: LoopEvent?
    private var backoffMs: Int64 = 100
    public private(set) var lastError: StoreError?
    /// Called each time a connection becomes ready (first time and after reconnects).
    public var onReady: (() -> Void)?
    public var log: (String) -> Void = { _ in }
    /// Test-only fault injection handed to every writer (`GroupCommitWriter.commitFlushedForTesting`).
    public var commitFlushedForTesting: ((_ socket: Int32, _ eventRows: Int) -> Bool)?
    /// Handed to every writer (`GroupCommitWriter.afterCompletions`): runs once a committed
    /// transaction's completions have run, before the next transaction is sent.
    public var afterCompletions: (() -> Void)?
    /// Handed to every writer, the current one included (`GroupCommitWriter.onCommitted`; metrics).
    public var onCommitted: ((_ eventRows: Int, _ rows: Int, _ nanoseconds: Int64) -> Void)? {
        didSet { writer?.onCommitted = onCommitted }
    }
    /// Times the connection was lost, and connected again (metrics).
    public private(set) var disconnects = 0
    public private(set) var reconnects = 0
    /// Limits handed to every writer (first connection and reconnects).
    public var limits = GroupCommitWriter.Limits()
    /// The partition and epoch handed to every writer (first connection and reconnects).
    public var scope = AppendScope.unfenced
    /// Run on every reconnected connection before it becomes the writer (blocking, on the loop;
    /// PostgreSQL has just answered: keep it to short statements that do not wait).
    public var prepareReconnected: ((PGConnection) -> Void)?

    public init(loop: EventLoop, url: String) {
        self.loop = loop
        self.url = url
    }

    /// Adopts an already-connected connection (start-up connects synchronously before serving).
    public func adopt(_ connection: PGConnection) throws(StoreError) {
        let w = try GroupCommitWriter(connection: connection, limits: limits, scope: scope)
        install(w)
    }

    public var isReady: Bool { writer.map { !$0.isBroken } ?? false }

    /// The writer if connected; otherwise the error to give callers.
    public func currentWriter() -> Result<GroupCommitWriter, StoreError> {
        if let w = writer, !w.isBroken { return .success(w) }
        return .failure(lastError ?? .unavailable("reconnecting to PostgreSQL"))
    }

    /// To be called after handing the writer new work, so its output gets flushed and watched.
    public func kick() {
        guard let w = writer else { return }
        w.pump()
        afterIO()
    }

    private func install(_ w: GroupCommitWriter) {
        w.commitFlushedForTesting = commitFlushedForTesting
        w.afterCompletions = afterCompletions
        w.onCommitted = onCommitted
        writer = w
        lastError = nil
        backoffMs = 100
        readWatch = loop.watch(fd: w.socket, flags: Int32(EV_READ | EV_PERSIST)) { [weak self] _ in
            guard let self, let w = self.writer else { return }
            w.socketReadable()
            self.afterIO()
        }
        readWatch?.arm()
        writeWatch = loop.watch(fd: w.socket, flags: Int32(EV_WRITE)) { [weak self] _ in
            guard let self, let w = self.writer else { return }
            w.socketWritable()
            self.afterIO()
        }
        onReady?()
    }

    /// Closes the writer's connection and stops reconnecting (the service has stopped).
    public func close() {
        retryTimer = nil
        connector = nil
        readWatch = nil
        writeWatch = nil
        writer?.connection.close()
        writer = nil
    }

    private func afterIO() {
        guard let w = writer else { return }
        if w.isBroken, let failure = w.failure {
            lastError = failure
            disconnects += 1
            log("warning: lost PostgreSQL: \(failure); reconnecting")
            readWatch = nil
            writeWatch = nil
            writer = nil
            scheduleReconnect()
            return
        }
        if w.wantsWrite && !(writeWatch?.isArmed ?? false) { writeWatch?.arm() }
    }

    private func scheduleReconnect() {
        retryTimer = loop.timer { [weak self] in self?.startConnect() }
        retryTimer?.arm(afterMilliseconds: backoffMs)
        backoffMs = min(backoffMs * 2, 5_000)
    }

    private func startConnect() {
        connector = LoopConnector(loop: loop, url: url) { [weak self] result in
            guard let self else { return }
            self.connector = nil
            do {
                let connection = try result.get()
                self.prepareReconnected?(connection)
                try self.install(GroupCommitWriter(connection: connection, limits: self.limits, scope: self.scope))
                self.reconnects += 1
                self.log("reconnected to PostgreSQL")
            } catch let error as StoreError {
                self.lastError = error
                self.scheduleReconnect()
            } catch {
                self.scheduleReconnect()
            }
        }
    }
}
