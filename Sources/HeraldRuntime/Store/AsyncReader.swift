// Read queries on the loop without blocking it: one query at a time on a non-blocking connection.
import CLibEvent
import HeraldStore

/// Runs read queries (consumer catch-up, consumer look-ups) on its own connection, queued and
/// answered in order, driven by the loop. If the connection fails, queued reads fail with the
/// error and the next read reconnects (blocking for at most connect_timeout is avoided by
/// deferring: reads are retried by their callers).
public final class AsyncReader {
    private let loop: EventLoop
    private let url: String
    private var connection: PGConnection?
    private var watch: LoopEvent?
    private var queue: [(sql: String, parameters: [String?], completion: (Result<PGResult, StoreError>) -> Void)] = []
    private var inFlight = false
    private var result: PGResult?

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
        guard let connection, !connection.isBad else { failAll(.unavailable("the read connection is down")); return }
        inFlight = true
        if !connection.send(next.sql, next.parameters) { failAll(.unavailable(connection.lastErrorMessage)); return }
        while connection.flush() == 1 { _ = PGPoll.wait(socket: connection.socket, read: false, write: true, timeoutMilliseconds: 100) }
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
        // Reconnect lazily (start-up quality: a blocking connect bounded by connect_timeout).
        if let c = try? PGConnection.connect(url) { try? adopt(c) }
    }
}
