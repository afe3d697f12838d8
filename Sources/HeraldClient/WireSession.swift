// One logical connection on a thread of its own: connect, hello, a poll loop of writes and lines, reconnects with backoff.
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reconnect delays: `initial` doubling up to `maximum`, with jitter; `attempts` 0 retries forever.
public struct Backoff: Sendable, Hashable {
    public var initialMilliseconds: Int
    public var maximumMilliseconds: Int
    public var attempts: Int
    public init(initialMilliseconds: Int = 50, maximumMilliseconds: Int = 2_000, attempts: Int = 0) {
        self.initialMilliseconds = initialMilliseconds; self.maximumMilliseconds = maximumMilliseconds; self.attempts = attempts
    }
}

/// Where and how to connect.
struct Endpoint: Sendable {
    var host: String
    var port: Int
    var token: String?
    var tls: TLSOptions?
    var backoff: Backoff
    var address: String { "\(host):\(port)" }
}

/// What a session's owner (a producer connection or a subscription) does with it. Called on the
/// session's thread only; implementations keep their state behind their own lock.
protocol SessionHandler: AnyObject, Sendable {
    /// After each granted hello: the bytes to write first (requests to send again, a subscribe).
    func sessionConnected(_ hello: HelloReply, isReconnect: Bool) -> [UInt8]
    /// A reply (a line with `ok`), read no further than `head`; a returned error ends the session.
    func replyReceived(_ line: [UInt8], _ head: ReplyHead) -> HeraldError?
    /// A delivery line, read no further than its routing members.
    func deliveryReceived(_ delivery: DeliveryLine)
    /// Any other line but goodbye, parsed; a returned error ends the session.
    func lineReceived(_ line: [UInt8], _ json: [String: HeraldJSON]) -> HeraldError?
    /// The connection is gone (a reconnect follows unless the session ends).
    func sessionDisconnected()
    /// The session will not connect again: closed (`client_closed`), refused or given up.
    func sessionEnded(_ error: HeraldError)
    /// Bytes queued since the last call, to write now.
    func takeOutgoing() -> [UInt8]
    /// False while the owner's buffer of unread lines is full: the socket is then not read, and TCP slows the server.
    var wantsToRead: Bool { get }
    /// Called at least every `tickMilliseconds` (batched acks, keep-alive pings, time-outs).
    func ticked(nowMilliseconds: UInt64)
    var tickMilliseconds: Int32 { get }
}

func monotonicMilliseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1000 + UInt64(ts.tv_nsec) / 1_000_000
}

final class WireSession: Sendable {
    let endpoint: Endpoint
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let stopping = Atomic<Bool>(false)
    /// Set once; the thread drops it when it ends (breaking the owner ↔ session cycle).
    private let handler: Mutex<SessionHandler?>
    /// The negotiated TLS protocol of the current connection.
    let tlsProtocol = Mutex<String?>(nil)
    private static let maximumLine = 1 << 20
    /// Writes smaller than this wait `coalesceMicroseconds` for more requests to join them.
    private static let coalesceBytes = 16_384
    private static let coalesceMicroseconds: UInt32 = 100

    init(endpoint: Endpoint) {
        self.endpoint = endpoint
        self.handler = Mutex(nil)
        var fds: [Int32] = [0, 0]
        _ = pipe(&fds)
        for fd in fds {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        wakeRead = fds[0]
        wakeWrite = fds[1]
    }

    deinit {
        close(wakeRead)
        close(wakeWrite)
    }

    func start(handler: SessionHandler) {
        self.handler.withLock { $0 = handler }
        startThread { self.run() }
    }

    /// Wakes the thread to write what was queued.
    func wake() {
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }

    /// Ends the session: the thread closes the connection and calls `sessionEnded(client_closed)`.
    func stop() {
        stopping.store(true, ordering: .sequentiallyConsistent)
        wake()
    }

    private var isStopping: Bool { stopping.load(ordering: .relaxed) }

    private func drainWake() {
        var sink = [UInt8](repeating: 0, count: 64)
        while read(wakeRead, &sink, sink.count) > 0 {}
    }

    /// Sleeps up to `milliseconds`, or until `stop()`.
    private func pause(_ milliseconds: Int) {
        var p = pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)
        _ = poll(&p, 1, Int32(milliseconds))
        drainWake()
    }

    private func run() {
        guard let handler = handler.withLock({ $0 }) else { return }
        var first = true
        var attempt = 0
        var delay = endpoint.backoff.initialMilliseconds
        var ending: HeraldError = .closed
        while !isStopping {
            let socket: LineSocket, hello: HelloReply, leftover: [UInt8]
            do {
                (socket, hello, leftover) = try connectAndHello()
            } catch {
                if first || error.isFinal { ending = error; break }
                attempt += 1
                if endpoint.backoff.attempts > 0 && attempt >= endpoint.backoff.attempts {
                    ending = HeraldError(code: "unreachable", title: "Could not reconnect to \(endpoint.address)",
                                         detail: "Gave up after \(attempt) attempts: \(error)")
                    break
                }
                pause(Int(Double(delay) * Double.random(in: 0.5...1.0)))
                delay = min(delay * 2, endpoint.backoff.maximumMilliseconds)
                continue
            }
            attempt = 0
            delay = endpoint.backoff.initialMilliseconds
            tlsProtocol.withLock { $0 = socket.tlsProtocol }
            let initial = handler.sessionConnected(hello, isReconnect: !first)
            first = false
            let outcome = loop(socket, handler: handler, initial: initial, leftover: leftover)
            socket.close()
            handler.sessionDisconnected()
            if let error = outcome { ending = error; break }
            // A reconnect right after a drop or goodbye: a restarting server is given a moment.
            if !isStopping { pause(Int(Double(endpoint.backoff.initialMilliseconds) * Double.random(in: 0.5...1.0))) }
        }
        handler.sessionEnded(ending)
        self.handler.withLock { $0 = nil }
    }

    private func connectAndHello() throws(HeraldError) -> (LineSocket, HelloReply, [UInt8]) {
        let socket = try LineSocket.open(host: endpoint.host, port: endpoint.port, tls: endpoint.tls)
        var w = JSONWriter(capacity: 64)
        w.beginObject()
        w.member("op", "hello")
        w.member("rid", "hello")
        w.member("token", endpoint.token ?? "")
        w.endObject()
        w.bytes.append(0x0A)
        let deadline = monotonicMilliseconds() + 10_000
        var offset = 0
        while offset < w.bytes.count {
            switch w.bytes.withUnsafeBytes({ socket.write(UnsafeRawBufferPointer(rebasing: $0[offset...])) }) {
            case .bytes(let n): offset += n
            case .wouldBlock(let wantsWrite): try wait(socket, write: wantsWrite, until: deadline)
            case .closed: throw HeraldError(code: "connect_failed", title: "\(endpoint.address) closed the connection before hello", detail: "")
            case .failed(let m): throw HeraldError(code: "connect_failed", title: "Writing hello to \(endpoint.address) failed", detail: m)
            }
        }
        var buffer: [UInt8] = []
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: 65_536, alignment: 1)
        defer { chunk.deallocate() }
        var sawGoodbye = false
        while true {
            while let nl = buffer.firstIndex(of: 0x0A) {
                let line = Array(buffer[..<nl])
                buffer.removeSubrange(...nl)
                guard case .object(let obj) = try HeraldJSON.parse(line) else { continue }
                if obj["ok"] == nil {
                    if obj["op"]?.stringValue == "goodbye" { sawGoodbye = true }
                    continue
                }
                guard obj["ok"]?.boolValue == true else { throw HeraldError(reply: obj) }
                if sawGoodbye {
                    throw HeraldError(code: "connect_failed", title: "\(endpoint.address) is stopping", detail: "It said goodbye at hello.")
                }
                return (socket, HelloReply(reply: obj), buffer)
            }
            switch socket.read(into: chunk) {
            case .bytes(let n): buffer.append(contentsOf: UnsafeRawBufferPointer(rebasing: chunk[..<n]))
            case .wouldBlock(let wantsWrite): try wait(socket, write: wantsWrite, until: deadline)
            case .closed: throw HeraldError(code: "connect_failed", title: "\(endpoint.address) closed the connection at hello", detail: "")
            case .failed(let m): throw HeraldError(code: "connect_failed", title: "Reading the hello reply from \(endpoint.address) failed", detail: m)
            }
        }
    }

    private func wait(_ socket: LineSocket, write: Bool, until deadline: UInt64) throws(HeraldError) {
        if socket.hasBufferedInput && !write { return }
        let now = monotonicMilliseconds()
        guard now < deadline, !isStopping else {
            throw isStopping ? .closed : HeraldError(code: "timeout", title: "\(endpoint.address) did not answer hello within 10 s", detail: "")
        }
        var p = pollfd(fd: socket.fd, events: Int16(write ? POLLOUT : POLLIN), revents: 0)
        _ = poll(&p, 1, Int32(min(deadline - now, 1_000)))
    }

    /// Runs one connection until it drops (nil) or the session must end (the error).
    private func loop(_ socket: LineSocket, handler: SessionHandler, initial: [UInt8], leftover: [UInt8]) -> HeraldError? {
        var out = initial
        var outStart = 0
        var input = leftover
        var scanned = 0
        var draining = false
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: 65_536, alignment: 1)
        defer { chunk.deallocate() }

        /// Hands every complete line to the handler; an error ends the session, `false` drops the connection.
        func lines() -> (keep: Bool, end: HeraldError?) {
            var start = 0
            var i = scanned
            let count = input.count
            while i < count {
                if input[i] == 0x0A {
                    let line = Array(input[start..<i])
                    start = i + 1
                    if let delivery = DeliveryLine.scan(line) {
                        handler.deliveryReceived(delivery)
                    } else if let head = ReplyHead.scan(line) {
                        if let error = handler.replyReceived(line, head) { return (false, error) }
                    } else if !line.isEmpty {
                        guard case .object(let obj)? = try? HeraldJSON.parse(line) else { return (false, nil) }
                        if obj["ok"] == nil, obj["op"]?.stringValue == "delivery" {
                            handler.deliveryReceived(DeliveryLine(line: line, json: obj))
                        } else if obj["ok"] == nil, obj["op"]?.stringValue == "goodbye" {
                            // The server reads nothing more: stop writing, read the replies it owes, then reconnect.
                            draining = true
                        } else if let error = handler.lineReceived(line, obj) {
                            return (false, error)
                        }
                    }
                }
                i += 1
            }
            if start > 0 { input.removeSubrange(..<start) }
            scanned = input.count
            if input.count > Self.maximumLine { return (false, nil) }
            return (true, nil)
        }

        if !input.isEmpty {
            let (keep, end) = lines()
            if let end { return end }
            if !keep { return nil }
        }
        while true {
            if isStopping { return .closed }
            if !draining {
                var more = handler.takeOutgoing()
                if !more.isEmpty && more.count < Self.coalesceBytes {
                    // A caller pipelining requests queues them one by one: a moment's wait gathers
                    // the burst into one write, which the server then reads and parses in one go
                    // (a write per request cost the server a read per request).
                    usleep(Self.coalesceMicroseconds)
                    more.append(contentsOf: handler.takeOutgoing())
                }
                if !more.isEmpty {
                    if outStart == out.count { out = more; outStart = 0 } else { out.append(contentsOf: more) }
                }
            }
            var pollOut = false, pollInForWrite = false
            while !draining && outStart < out.count {
                let result = out.withUnsafeBytes { socket.write(UnsafeRawBufferPointer(rebasing: $0[outStart...])) }
                switch result {
                case .bytes(let n): outStart += n
                case .wouldBlock(let wantsWrite): if wantsWrite { pollOut = true } else { pollInForWrite = true }
                case .closed, .failed: return nil
                }
                if case .wouldBlock = result { break }
            }
            if outStart > 0 && outStart == out.count { out.removeAll(keepingCapacity: true); outStart = 0 }

            let reading = handler.wantsToRead || draining
            if reading {
                reads: for _ in 0..<16 {
                    switch socket.read(into: chunk) {
                    case .bytes(let n):
                        input.append(contentsOf: UnsafeRawBufferPointer(rebasing: chunk[..<n]))
                        let (keep, end) = lines()
                        if let end { return end }
                        if !keep { return nil }
                        if !(handler.wantsToRead || draining) { break reads }
                    case .wouldBlock(let wantsWrite):
                        if wantsWrite { pollOut = true }
                        break reads
                    case .closed, .failed:
                        return nil
                    }
                }
            }
            handler.ticked(nowMilliseconds: monotonicMilliseconds())
            if reading && socket.hasBufferedInput { continue }
            var events = Int16(0)
            if reading || pollInForWrite { events |= Int16(POLLIN) }
            if pollOut { events |= Int16(POLLOUT) }
            var fds = [pollfd(fd: socket.fd, events: events, revents: 0), pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
            _ = poll(&fds, 2, handler.tickMilliseconds)
            if fds[1].revents != 0 { drainWake() }
            if fds[0].revents & Int16(POLLHUP | POLLERR) != 0 && !reading {
                // Closed while the owner's buffer was full: read what is left, then reconnect.
                switch socket.read(into: chunk) {
                case .bytes(let n): input.append(contentsOf: UnsafeRawBufferPointer(rebasing: chunk[..<n]))
                case .wouldBlock: break
                case .closed, .failed: return nil
                }
            }
        }
    }
}

/// Runs `body` on a new detached thread (no Foundation: the library stays light).
func startThread(_ body: @escaping @Sendable () -> Void) {
    final class Box { let body: @Sendable () -> Void; init(_ b: @escaping @Sendable () -> Void) { body = b } }
    let context = Unmanaged.passRetained(Box(body)).toOpaque()
    #if canImport(Glibc)
    var thread = pthread_t()
    #else
    var thread: pthread_t?
    #endif
    let rc = pthread_create(&thread, nil, { raw in
        #if canImport(Glibc)
        let box = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
        #else
        let box = Unmanaged<Box>.fromOpaque(raw).takeRetainedValue()
        #endif
        box.body()
        return nil
    }, context)
    precondition(rc == 0, "pthread_create failed: \(rc)")
    #if canImport(Glibc)
    pthread_detach(thread)
    #else
    if let thread { pthread_detach(thread) }
    #endif
}
