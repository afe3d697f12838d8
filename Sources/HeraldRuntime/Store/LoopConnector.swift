// Connects to PostgreSQL without blocking the loop (PQconnectStart/PQconnectPoll driven by libevent).
import CLibEvent
import CLibPQ
import Glibc
import HeraldStore
import Synchronization

/// One non-blocking connection attempt. Host names in `url` are looked up on a thread of their
/// own first (`HostResolution`: libpq's `PQconnectStart` would resolve them on the loop); then
/// libpq says which socket readiness it waits for, and the loop wakes it then. Gives up after
/// `timeoutMilliseconds` of silence per step (the look-up is one step).
final class LoopConnector {
    /// Looks host names up, blocking (`HostResolution.resolve`; tests put a slow one in).
    typealias Resolver = @Sendable ([String]) -> Result<[String: [String]], StoreError>

    private let loop: EventLoop
    private var connection: PGConnection?
    private var watch: LoopEvent?
    private var completion: ((Result<PGConnection, StoreError>) -> Void)?
    private let timeoutMilliseconds: Int64

    init(loop: EventLoop, url: String, timeoutMilliseconds: Int64 = 10_000,
         resolver: @escaping Resolver = HostResolution.resolve,
         completion: @escaping (Result<PGConnection, StoreError>) -> Void) {
        self.loop = loop
        self.completion = completion
        self.timeoutMilliseconds = timeoutMilliseconds
        let names = HostResolution.namesToResolve(url)
        if names.isEmpty { start(url) } else { resolve(names, in: url, with: resolver) }
    }

    private func start(_ conninfo: String) {
        do {
            connection = try PGConnection.startConnect(conninfo)
            step(PGRES_POLLING_WRITING)
        } catch {
            finish(.failure(error))
        }
    }

    /// A look-up's result, handed from its thread to the loop: the thread stores it and writes
    /// the eventfd the loop watches. Owned by both the thread and the watch's callback: the
    /// descriptor stays open while either may use it (the watch is freed before it closes).
    private final class Handoff: Sendable {
        let fd = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        private let stored = Mutex<Result<[String: [String]], StoreError>?>(nil)
        var result: Result<[String: [String]], StoreError>? { stored.withLock { $0 } }
        func deliver(_ r: Result<[String: [String]], StoreError>) {
            stored.withLock { $0 = r }
            var one: UInt64 = 1
            _ = write(fd, &one, 8)
        }
        deinit { close(fd) }
    }

    /// Runs `body` on a new detached thread (the service has no other; a look-up is rare: once
    /// for each connection made on the loop, as after PostgreSQL was lost). False when the
    /// thread cannot be made.
    private static func detached(_ body: @escaping @Sendable () -> Void) -> Bool {
        final class Body { let run: @Sendable () -> Void; init(_ run: @escaping @Sendable () -> Void) { self.run = run } }
        let context = Unmanaged.passRetained(Body(body)).toOpaque()
        var thread = pthread_t()
        let status = pthread_create(&thread, nil, { raw in
            Unmanaged<Body>.fromOpaque(raw!).takeRetainedValue().run()
            return nil
        }, context)
        guard status == 0 else {
            Unmanaged<Body>.fromOpaque(context).release()
            return false
        }
        pthread_detach(thread)
        return true
    }

    private func resolve(_ names: [String], in url: String, with resolver: @escaping Resolver) {
        let handoff = Handoff()
        guard handoff.fd >= 0 else {
            finish(.failure(.unavailable("could not make an eventfd to look up \(names.joined(separator: ", ")): \(String(cString: strerror(errno)))")))
            return
        }
        watch = loop.watch(fd: handoff.fd, flags: Int32(EV_READ)) { [weak self] what in
            guard let self else { return }
            if what & Int16(EV_TIMEOUT) != 0 {
                self.finish(.failure(.unavailable("looking up the database host \(names.map { "“\($0)”" }.joined(separator: ", ")) "
                    + "took over \(self.timeoutMilliseconds / 1000) s; check this machine's DNS. Herald tries again.")))
                return
            }
            switch handoff.result {
            case .success(let addresses): self.start(HostResolution.conninfo(url, resolved: addresses))
            case .failure(let error): self.finish(.failure(error))
            case nil: self.finish(.failure(.unavailable("the look-up of the database host ended without an answer")))
            }
        }
        watch?.arm(afterMilliseconds: timeoutMilliseconds)
        if !Self.detached({ handoff.deliver(resolver(names)) }) {
            // No thread to spare: look up here, as libpq would have.
            handoff.deliver(resolver(names))
        }
    }

    private func step(_ status: PostgresPollingStatusType) {
        guard let conn = connection else { return }
        switch status {
        case PGRES_POLLING_OK:
            finish(.success(conn))
        case PGRES_POLLING_FAILED:
            finish(.failure(.unavailable(conn.lastErrorMessage)))
        default:
            let flags = status == PGRES_POLLING_READING ? EV_READ : EV_WRITE
            watch = loop.watch(fd: conn.socket, flags: Int32(flags)) { [weak self] what in
                guard let self, let c = self.connection else { return }
                if what & Int16(EV_TIMEOUT) != 0 {
                    self.finish(.failure(.unavailable("connecting to PostgreSQL timed out")))
                    return
                }
                self.step(c.pollConnect())
            }
            watch?.arm(afterMilliseconds: timeoutMilliseconds)
        }
    }

    private func finish(_ result: Result<PGConnection, StoreError>) {
        watch = nil
        connection = nil
        let done = completion
        completion = nil
        done?(result)
    }
}
