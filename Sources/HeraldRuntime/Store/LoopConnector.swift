// Connects to PostgreSQL without blocking the loop (PQconnectStart/PQconnectPoll driven by libevent).
import CLibEvent
import CLibPQ
import HeraldStore

/// One non-blocking connection attempt. libpq says which socket readiness it waits for;
/// the loop wakes it then. Gives up after `timeoutMilliseconds` of silence per step.
final class LoopConnector {
    private let loop: EventLoop
    private var connection: PGConnection?
    private var watch: LoopEvent?
    private var completion: ((Result<PGConnection, StoreError>) -> Void)?
    private let timeoutMilliseconds: Int64

    init(loop: EventLoop, url: String, timeoutMilliseconds: Int64 = 10_000, completion: @escaping (Result<PGConnection, StoreError>) -> Void) {
        self.loop = loop
        self.completion = completion
        self.timeoutMilliseconds = timeoutMilliseconds
        do {
            connection = try PGConnection.startConnect(url)
            step(PGRES_POLLING_WRITING)
        } catch {
            finish(.failure(error))
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
