// Read queries on the loop without blocking it: one query at a time on a non-blocking connection.
import CLibEvent
import HeraldStore

/// Runs read queries (consumer catch-up, consumer look-ups) on its own connection, queued and
/// answered in order, driven by the loop. If the connection fails, queued reads fail with the
/// error (callers answer `store_unavailable` or retry) and the reader reconnects without
/// blocking the loop.
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
        for item in items { item.completion(.failure(error)) }
        watch = nil
        connection = nil
        guard connector == nil else { return }
        connector = LoopConnector(loop: loop, url: url) { [weak self] result in
            guard let self else { return }
            self.connector = nil
            if case .success(let c) = result { try? self.adopt(c) }
            self.sendNext()
        }
    }
}
