// Read queries on the loop without blocking it: one query at a time on a non-blocking connection.
import CLibEvent
import HeraldStore

/// Runs read queries (consumer catch-up, consumer look-ups, lean content) on its own connection,
/// queued and answered in order, driven by the loop. If the connection fails, queued reads fail
/// with the error (callers answer `store_unavailable` or retry) and the reader reconnects at once
/// and then with back-off (100 ms doubling to 5 s) until it is back, never blocking the loop: a
/// `LoopConnector` (PQconnectStart/PQconnectPoll on socket readiness). Reads asked for while it
/// reconnects wait for the attempt in progress and fail if it fails.
public final class AsyncReader {
    private let loop: EventLoop
    private let url: String
    private var connection: PGConnection?
    private var watch: LoopEvent?
    private var queue: [(sql: String, parameters: [String?], completion: (Result<PGResult, StoreError>) -> Void)] = []
    private var inFlight = false
    private var result: PGResult?
    private var connector: LoopConnector?
    private var writeWatch: LoopEvent?
    private var retryTimer: LoopEvent?
    private var backoffMilliseconds: Int64 = 100
    /// Set while the connection is lost: the first failure is logged, and the reconnect.
    private var lostSince: Int64?
    public var log: (String) -> Void = { _ in }
    /// Connections made after a loss (tests, stats).
    public private(set) var reconnects = 0
    public var isConnected: Bool { connection.map { !$0.isBad } ?? false }

    public init(loop: EventLoop, url: String) {
        self.loop = loop
        self.url = url
    }

    public func adopt(_ connection: PGConnection) throws(StoreError) {
        try connection.setNonBlocking()
        self.connection = connection
        watch = loop.watch(fd: connection.socket, flags: Int32(EV_READ | EV_PERSIST)) { [weak self] _ in self?.readable() }
        watch?.arm()
    }

    public func query(_ sql: String, _ parameters: [String?], completion: @escaping (Result<PGResult, StoreError>) -> Void) {
        queue.append((sql, parameters, completion))
        sendNext()
    }

    private func sendNext() {
        guard !inFlight, let next = queue.first else { return }
        guard let connection, !connection.isBad else {
            // Down: wait for an attempt under way, else fail now (the next attempt is armed).
            if connector == nil { failAll(.unavailable("the read connection is down; reconnecting")) }
            return
        }
        inFlight = true
        if !connection.send(next.sql, next.parameters) { failAll(.unavailable(connection.lastErrorMessage)); return }
        flush()
    }

    /// Sends what libpq buffered; if the socket is full, finishes when it is writable.
    private func flush() {
        guard let connection else { return }
        if connection.flush() == 1 {
            writeWatch = loop.watch(fd: connection.socket, flags: Int32(EV_WRITE)) { [weak self] _ in self?.flush() }
            writeWatch?.arm()
        }
    }

    private func readable() {
        guard let connection else { return }
        guard connection.consumeInput() else { failAll(.unavailable(connection.lastErrorMessage)); return }
        while inFlight {
            switch connection.nextResult() {
            case .wouldBlock:
                return
            case .result(let r):
                if result == nil { result = r }
            case .endOfStatement:
                let r = result
                result = nil
                inFlight = false
                let item = queue.removeFirst()
                if let r, let error = r.error { item.completion(.failure(error)) } else if let r { item.completion(.success(r)) } else {
                    item.completion(.failure(.unavailable(connection.lastErrorMessage)))
                }
                sendNext()
            }
        }
    }

    private func failAll(_ error: StoreError) {
        let items = queue
        queue.removeAll()
        inFlight = false
        result = nil
        if connection != nil {
            lostSince = ClientConnection.monotonicMilliseconds()
            log("warning: lost the read connection to PostgreSQL (\(error)); reconnecting without blocking (reads fail meanwhile)")
        }
        watch = nil
        writeWatch = nil
        connection = nil
        reconnect()  // first: a caller that asks again from its completion waits for this attempt
        for item in items { item.completion(.failure(error)) }
    }

    /// One non-blocking connection attempt now (unless one is under way or armed); on failure the
    /// next one after the back-off.
    private func reconnect() {
        guard connector == nil, connection == nil, !(retryTimer?.isArmed ?? false) else { return }
        // The connector may finish inside its init (a connection string libpq refuses at once):
        // then it must not be kept as the attempt under way.
        var finished = false
        let attempt = LoopConnector(loop: loop, url: url) { [weak self] result in
            finished = true
            guard let self else { return }
            self.connector = nil
            switch result {
            case .success(let c):
                do {
                    try self.adopt(c)
                    self.reconnects += 1
                    self.backoffMilliseconds = 100
                    if let since = self.lostSince {
                        self.log("read connection to PostgreSQL back after \(ClientConnection.monotonicMilliseconds() - since) ms")
                        self.lostSince = nil
                    }
                } catch {
                    self.retryLater()
                }
            case .failure:
                self.retryLater()
            }
            // Reads queued during the attempt: sent now, or failed (and the next attempt armed).
            if self.connection == nil, !self.queue.isEmpty {
                let items = self.queue
                self.queue.removeAll()
                for item in items { item.completion(.failure(.unavailable("the read connection is down; reconnecting"))) }
            } else {
                self.sendNext()
            }
        }
        if !finished { connector = attempt }
    }

    private func retryLater() {
        if retryTimer == nil { retryTimer = loop.timer { [weak self] in self?.reconnect() } }
        retryTimer?.arm(afterMilliseconds: backoffMilliseconds)
        backoffMilliseconds = min(backoffMilliseconds * 2, 5_000)
    }
}
