// One client's TCP connection: bytes in through the framer and session, replies and deliveries out.
import CLibEvent
import DequeModule
import Glibc
import HeraldCore

/// A client connection on a libevent bufferevent. It owns the protocol state (`ClientSession`)
/// and performs its actions; requests go to the `delegate` (the service), which answers with
/// `complete(ticket:reply:)`. Every way a connection ends goes through `close(reason:)`.
public final class ClientConnection {
    public let id: UInt64
    public let peer: String
    private var bev: OpaquePointer?
    /// Strong: the event_base must outlive this connection's bufferevent.
    private let loop: EventLoop
    private var framer: LineFramer
    public private(set) var session: ClientSession
    /// The session's actions not yet carried out (one queue kept with its capacity; see `performPending`).
    private var pendingActions = Deque<ClientSession.Action>()
    /// Not `weak`: a weak reference would give the service a side table (see `Unretained`);
    /// the service clears this when its deinit starts.
    private let delegateRef: ConnectionDelegateRef
    private var delegate: (any ConnectionDelegate)? { delegateRef.delegate }
    public private(set) var isClosing = false
    private var readPaused = false
    /// Set while the service resolves a request before appending it (`holdDispatch`): the
    /// connection's later requests wait, so they are stored after it.
    private var dispatchHeld = false
    /// Work waiting for a reply to go out (`whenReplySent`).
    private var afterReplies: [(ticket: UInt64, work: () -> Void)] = []
    /// Set by `closeAfterReplies`: nothing more is read, and once every request read is answered
    /// this line (if any) goes out and the connection closes for this reason.
    private var closing: (finalLine: [UInt8]?, reason: String)?
    /// After the server's close: the output is sent and the FIN with it; what the client still
    /// sends is read and dropped until its TCP has acknowledged the output (`linger`).
    private var lingering = false
    /// How often a lingering connection looks whether its client has acknowledged everything.
    static let lingerCheckMilliseconds: Int64 = 20
    /// The longest a connection lingers (a client that neither reads nor closes).
    public static let lingerAtMostMilliseconds: Int64 = 30_000
    private var lingerSince: Int64 = 0
    private var finished = false
    /// TLS connections only: whether the client's certificate has been looked at (after the handshake).
    private var peerChecked: Bool
    /// Called (once) when the output drains below the low-water mark; consumers resume on it.
    public var onDrained: (() -> Void)?
    /// The consumer name a subscribe on this connection took (from the request on, so a second
    /// subscribe pipelined behind it is refused too): one stream a connection.
    var consumerName: String?
    /// Its member id in that consumer's group (SPEC §9): given by the router that forwarded the
    /// subscribe, or made here.
    var consumerMember: String?

    /// Bound on unanswered requests before we stop reading from this client (backpressure).
    public static let maxOutstanding = 4096

    /// The connection's deadlines (see `startDeadlines`): one timer, re-armed lazily.
    private var deadline: LoopEvent?
    private var limits = Limits()
    /// When the last complete request line arrived (monotonic milliseconds).
    private var lastRequestAt: Int64 = 0
    /// When the connection was accepted (monotonic milliseconds).
    public let acceptedAt = ClientConnection.monotonicMilliseconds()
    /// Whether the connection speaks plaintext (a line can be written to its socket directly).
    private let plaintext: Bool

    /// How long a connection may take to say hello, to send its next request, and to accept
    /// output; and how much unsent output it may have before it is no longer read.
    public struct Limits {
        public var helloMilliseconds: Int64 = 10_000
        public var idleMilliseconds: Int64 = 300_000
        public var writeMilliseconds: Int64 = 60_000
        public var maxUnsentBytes = 4 << 20
        public init() {}
    }

    /// With `tls`, the bufferevent speaks TLS (the handshake runs before any line is read). Nil when
    /// the bufferevent cannot be made (memory ran out): the caller closes `fd`. A TLS connection
    /// never falls back to plaintext.
    init?(id: UInt64, fd: Int32, loop: EventLoop, session: ClientSession, maxLineBytes: Int, delegate: ConnectionDelegateRef,
          tls: TLSContext? = nil) {
        self.id = id
        self.loop = loop
        self.session = session
        self.framer = LineFramer(maxLineBytes: maxLineBytes)
        self.delegateRef = delegate
        self.peer = Self.peerName(fd)
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        peerChecked = tls == nil
        plaintext = tls == nil
        let made = if let tls { tls.bufferevent(base: loop.base, fd: fd) }
                   else { bufferevent_socket_new(loop.base, fd, Int32(BEV_OPT_CLOSE_ON_FREE.rawValue)) }
        guard let made else { return nil }
        bev = made
        // Unretained: the service holds this connection until the bufferevent is freed (in deinit).
        let context = Unmanaged.passUnretained(self).toOpaque()
        bufferevent_setcb(bev, { _, context in
            Unmanaged<ClientConnection>.fromOpaque(context!).takeUnretainedValue().readable()
        }, { _, context in
            Unmanaged<ClientConnection>.fromOpaque(context!).takeUnretainedValue().writable()
        }, { _, what, context in
            Unmanaged<ClientConnection>.fromOpaque(context!).takeUnretainedValue().event(what)
        }, context)
        bufferevent_enable(bev, Int16(EV_READ | EV_WRITE))
        unretained.object = self
    }

    deinit {
        unretained.object = nil
        if let bev { bufferevent_free(bev) }
    }

    /// How timers and consumer streams refer to this connection: not `weak` (see `Unretained`).
    let unretained = Unretained<ClientConnection>()

    /// Bytes queued for the client and not yet written to the socket.
    public var outputBytes: Int {
        guard let bev else { return 0 }
        return evbuffer_get_length(bufferevent_get_output(bev))
    }

    /// Starts the deadlines, counted from now (the accept):
    /// - **hello**: a connection without a valid hello `helloMilliseconds` after it was
    ///   accepted is closed, however many bytes it trickles in meanwhile (a read-inactivity
    ///   timeout would let a client sending one byte every few seconds hold its slot forever);
    /// - **idle**: after hello, no complete request line for `idleMilliseconds` closes it
    ///   (partial lines do not count; a connection with requests still being answered, or
    ///   not read because of backpressure, is not idle);
    /// - **write**: output that the client does not accept for `writeMilliseconds` (it stopped
    ///   reading, or vanished without a FIN) closes it and frees its buffers.
    public func startDeadlines(_ limits: Limits) {
        self.limits = limits
        lastRequestAt = Self.monotonicMilliseconds()
        if let bev {
            let ms = limits.writeMilliseconds
            var tv = timeval(tv_sec: Int(ms / 1000), tv_usec: Int((ms % 1000) * 1000))
            bufferevent_set_timeouts(bev, nil, &tv)
        }
        deadline = loop.timer { [unretained] in unretained.object?.deadlinePassed() }
        deadline?.arm(afterMilliseconds: limits.helloMilliseconds)
    }

    /// Ends a connection that has not said hello at once, to free its slot for a new client when
    /// the service is at its connection limit (`HeraldService.accept`): no linger — it was owed
    /// nothing — and, in plaintext, a last line written straight to the socket.
    /// Returns whether it did (false: closing already, said hello, or no socket).
    func evictBeforeHello(line: [UInt8], reason: String) -> Bool {
        guard !isClosing, session.grant == nil, let bev else { return false }
        isClosing = true
        delegate?.connectionClosing(self, reason: reason)
        if plaintext { _ = line.withUnsafeBytes { write(bufferevent_getfd(bev), $0.baseAddress, $0.count) } }
        finish(peerGone: true)
        return true
    }

    private func deadlinePassed() {
        guard !isClosing else {
            if lingering { checkLinger(); return }
            // Closed, but its output never drained: the peer is not reading. Free it now.
            finish(peerGone: true)
            return
        }
        if !peerChecked {
            // The TLS handshake never finished: nothing can be written to this client.
            close(reason: "no TLS handshake within \(limits.helloMilliseconds) ms of connecting")
            finish(peerGone: true)
            return
        }
        guard session.grant != nil else {
            send(WireReply.error(rid: nil, RequestError(code: "hello_timeout", title: "No hello within \(Self.seconds(limits.helloMilliseconds))",
                detail: "A connection must send {\"op\":\"hello\",\"token\":\"…\"} within \(Self.seconds(limits.helloMilliseconds)) of connecting. Reconnect and send hello first.")))
            close(reason: "no hello within \(limits.helloMilliseconds) ms of connecting")
            return
        }
        let quiet = Self.monotonicMilliseconds() - lastRequestAt
        if quiet >= limits.idleMilliseconds && session.outstanding == 0 && !readPaused {
            close(reason: "no request for \(quiet) ms (idle timeout \(limits.idleMilliseconds) ms)")
        } else {
            deadline?.arm(afterMilliseconds: max(1, limits.idleMilliseconds - quiet))
        }
    }

    /// Milliseconds on a clock that never steps (CLOCK_MONOTONIC_COARSE: a few ns a read).
    static func monotonicMilliseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC_COARSE, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }

    private static func seconds(_ ms: Int64) -> String {
        ms % 1000 == 0 ? "\(ms / 1000) s" : "\(Double(ms) / 1000) s"
    }

    // MARK: Output

    public func send(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { send($0) }
    }

    /// Queues bytes the caller keeps (libevent copies them): a consumer's batch goes from the
    /// loop's scratch buffer without an array of its own.
    public func send(_ bytes: UnsafeRawBufferPointer) {
        guard let bev, let base = bytes.baseAddress, !bytes.isEmpty else { return }
        _ = bufferevent_write(bev, base, bytes.count)
    }

    /// The answer to a dispatched request; sent when every earlier reply has been.
    public func complete(ticket: UInt64, reply: [UInt8]) {
        guard !isClosing || bev != nil else { return }
        if let bytes = session.releaseReply(ticket: ticket, reply: reply) { send(bytes) }
        runAfterReplies()
        resumeReadingIfCaughtUp()
        closeIfAnswered()
    }

    /// Runs `work` once the reply to `ticket` has been sent (at once if it has): a consumer's
    /// delivery lines start only after its subscribe reply, which waits for every earlier reply
    /// of the connection (SPEC §5: replies in request order, subscribe "→ then" delivery lines).
    public func whenReplySent(ticket: UInt64, _ work: @escaping () -> Void) {
        if session.replySent(ticket) { work() } else { afterReplies.append((ticket, work)) }
    }

    /// The `whenReplySent` work whose reply has gone out, in the order it was asked for.
    private func runAfterReplies() {
        guard !afterReplies.isEmpty else { return }
        var due: [() -> Void] = []
        afterReplies.removeAll { entry in
            guard session.replySent(entry.ticket) else { return false }
            due.append(entry.work)
            return true
        }
        for work in due { work() }
    }

    /// `complete(ticket:reply:)` for bytes the caller keeps (libevent copies them): sent at once
    /// when no earlier reply is outstanding, else copied into an array and held in order.
    public func complete(ticket: UInt64, replyIn bytes: UnsafeRawBufferPointer) {
        guard !isClosing || bev != nil else { return }
        if session.releaseReplyInPlace(ticket: ticket) {
            send(bytes)
            runAfterReplies()
            resumeReadingIfCaughtUp()
            closeIfAnswered()
        } else {
            complete(ticket: ticket, reply: Array(bytes))
        }
    }

    /// Backpressure: stop reading while too many requests are unanswered, or while too many
    /// reply bytes wait for a client that does not read them (TCP then slows the client).
    private var mustPauseReading: Bool {
        session.outstanding >= Self.maxOutstanding || outputBytes > limits.maxUnsentBytes
    }

    private func resumeReadingIfCaughtUp() {
        guard readPaused, !dispatchHeld, !isClosing, closing == nil, let bev,
              session.outstanding < Self.maxOutstanding / 2, outputBytes <= limits.maxUnsentBytes / 2 else { return }
        readPaused = false
        bufferevent_enable(bev, Int16(EV_READ))
        readable()
    }

    /// The tokens file was reloaded: re-check this connection's grant (it may be closed).
    /// What the next `hello` tells of the deployment (a router's routes changed).
    func topologyChanged(_ topology: [String: JSONValue]) { session.topology = topology }

    public func tokensReloaded(_ table: TokenTable) {
        perform(session.tokensReloaded(table))
    }

    /// Ends the connection once every request read so far is answered (SPEC §5: replies in
    /// request order, and an acknowledged request's ack is owed even when the connection ends):
    /// reads nothing more, then sends `finalLine` after those replies and closes. A line too
    /// long, a client's half-close and a revoked grant end a connection this way.
    func closeAfterReplies(_ finalLine: [UInt8]?, reason: String) {
        guard !isClosing, closing == nil else { return }
        closing = (finalLine, reason)
        if let bev { bufferevent_disable(bev, Int16(EV_READ)) }
        closeIfAnswered()
    }

    /// The lame-duck stop (SPEC §5 `goodbye`): `line` goes out at once, ahead of the replies
    /// still owed, and the connection ends as `closeAfterReplies` ends it: nothing more is read
    /// (what the client sends from now on is neither answered nor stored: it resubmits that
    /// elsewhere), every request read is answered, then it closes.
    func goodbye(_ line: [UInt8], reason: String) {
        guard !isClosing else { return }
        send(line)
        closeAfterReplies(nil, reason: reason)
    }

    /// `closeAfterReplies`' second half, once nothing read is unanswered.
    private func closeIfAnswered() {
        guard let c = closing, session.outstanding == 0, pendingActions.isEmpty else { return }
        closing = nil
        if let line = c.finalLine { send(line) }
        close(reason: c.reason)
    }

    /// Ends the connection: stops reading, lets queued output drain, then frees it. The reason is logged.
    public func close(reason: String) {
        guard !isClosing else { return }
        isClosing = true
        delegate?.connectionClosing(self, reason: reason)
        guard let bev else { return }
        bufferevent_disable(bev, Int16(EV_READ))
        if outputBytes == 0 {
            finish()
        } else {
            // Let the output drain, but not forever: a peer that stopped reading is freed at the write deadline.
            deadline?.disarm()
            deadline?.arm(afterMilliseconds: limits.writeMilliseconds)
        }
    }

    /// Frees the connection (once): called when queued output drained after `close` (which
    /// lingers first), or at once when the peer is gone.
    private func finish(peerGone: Bool = false) {
        guard let bev, !finished else { return }
        if !peerGone && !lingering { linger(); return }
        finished = true
        deadline?.disarm()
        bufferevent_disable(bev, Int16(EV_READ | EV_WRITE))
        shutdown(bufferevent_getfd(bev), Int32(SHUT_RDWR))
        delegate?.connectionClosed(self)
    }

    /// A lingering close (as web servers do): closing a socket whose client is still sending
    /// makes the kernel answer with a reset, and a reset destroys the replies and the last error
    /// line still on their way to the client (a client reading slowly or still sending would
    /// lose `line_too_long` and the acks of committed requests). So the
    /// output goes out with a FIN after it (`SHUT_WR`; TLS: close_notify first), and input is
    /// read and dropped until the client's TCP has acknowledged all of the output and the FIN
    /// (from then on a reset harms nothing: the client can read what it has), or it closes too,
    /// or `lingerAtMostMilliseconds` pass. A client reading normally is freed within milliseconds,
    /// so a lingering connection holds its slot only while its replies are still on their way.
    private func linger() {
        guard let bev else { return }
        lingering = true
        lingerSince = Self.monotonicMilliseconds()
        TLSContext.sendCloseNotify(bev)
        shutdown(bufferevent_getfd(bev), Int32(SHUT_WR))
        dropInput()
        bufferevent_enable(bev, Int16(EV_READ))
        checkLinger()
    }

    /// Ends the linger once the output is acknowledged or the linger's time is up; else looks again soon.
    private func checkLinger() {
        guard let bev else { return }
        let unacknowledged = herald_unacknowledged_bytes(bufferevent_getfd(bev))
        if unacknowledged <= 0 || Self.monotonicMilliseconds() - lingerSince >= Self.lingerAtMostMilliseconds {
            finish(peerGone: true)
            return
        }
        deadline?.disarm()
        deadline?.arm(afterMilliseconds: Self.lingerCheckMilliseconds)
    }

    /// Lingering: what the client still sends is not read as requests.
    private func dropInput() {
        guard let bev else { return }
        let input = bufferevent_get_input(bev)
        evbuffer_drain(input, evbuffer_get_length(input))
    }

    // MARK: Callbacks

    private func readable() {
        if lingering { dropInput(); return }
        guard let bev, !isClosing else { return }
        if !peerChecked { peerHandshakeCompleted() }
        let input = bufferevent_get_input(bev)
        while !isClosing && !readPaused && !dispatchHeld && closing == nil {
            let length = evbuffer_get_length(input)
            if length == 0 { break }
            var vector = iovec()  // evbuffer_iovec is a macro for struct iovec
            guard evbuffer_peek(input, -1, nil, &vector, 1) >= 1, let base = vector.iov_base else { break }
            let chunk = UnsafeRawBufferPointer(start: base, count: vector.iov_len)
            var lines = 0
            let hadGrant = session.grant != nil
            let ok = framer.feedLines(chunk) { line in
                lines += 1
                session.lineReceived(line, into: &pendingActions)
            }
            evbuffer_drain(input, vector.iov_len)
            if lines > 0 { lastRequestAt = Self.monotonicMilliseconds() }
            performPending()
            if !hadGrant && session.grant != nil {
                // Said hello: from now on the idle deadline applies.
                deadline?.disarm()
                deadline?.arm(afterMilliseconds: limits.idleMilliseconds)
            }
            if !ok {
                // The lines before it were read and may be committed: their replies go first.
                closeAfterReplies(WireReply.error(rid: nil, .lineTooLong(limit: framer.maxLineBytes)),
                                  reason: "sent a line over \(framer.maxLineBytes) bytes")
                return
            }
            if mustPauseReading {
                // Backpressure: stop reading until replies catch up (TCP pushes back on the client).
                readPaused = true
                bufferevent_disable(bev, Int16(EV_READ))
            }
        }
    }

    private func writable() {
        if isClosing { finish(); return }
        resumeReadingIfCaughtUp()
        onDrained?()
    }

    private func event(_ what: Int16) {
        if what & Int16(BEV_EVENT_CONNECTED) != 0 {
            if !peerChecked { peerHandshakeCompleted() }
        } else if lingering {
            // The client closed too (EOF), or its socket failed: the linger is over.
            finish(peerGone: true)
        } else if what & Int16(BEV_EVENT_EOF) != 0 {
            // The client sent its last byte. It may still read (a half-close: `nc -N`, a batch
            // loader): what it sent is answered, then the connection closes. A client gone
            // altogether makes those writes fail, which frees the connection at once (ERROR).
            closeAfterReplies(nil, reason: "client closed the connection")
        } else if what & Int16(BEV_EVENT_TIMEOUT) != 0 {
            // Only the write timeout is set: output waited `writeMilliseconds` without the peer taking a byte.
            close(reason: "accepted no output for \(limits.writeMilliseconds) ms (stopped reading, or gone without a FIN)")
            finish(peerGone: true)
        } else if what & Int16(BEV_EVENT_ERROR) != 0 {
            let message = bev.flatMap(TLSContext.failure) ?? "socket error: " + String(cString: strerror(errno))
            close(reason: message)
            finish(peerGone: true)
        }
    }

    /// TLS: the handshake is done; a verified client certificate's names go to the session.
    private func peerHandshakeCompleted() {
        guard let bev else { return }
        peerChecked = true
        let names = TLSContext.peerNames(bev)
        if !names.isEmpty { session.peerCertificateVerified(names: names) }
    }

    private func perform(_ actions: [ClientSession.Action]) {
        for action in actions { pendingActions.append(action) }
        performPending()
    }

    /// Holds this connection's later requests (those read and those still to read) until
    /// `releaseDispatch`: the service calls it when a request must be resolved asynchronously
    /// before it is appended — a withdraw without a user reads its recipients from PostgreSQL —
    /// so that requests sent after it are stored after it (SPEC §10: a withdraw never overtakes
    /// a submit, and decisions follow the user's order; §5: requests are handled in order).
    func holdDispatch() {
        guard !dispatchHeld, !isClosing, let bev else { return }
        dispatchHeld = true
        bufferevent_disable(bev, Int16(EV_READ))
    }

    /// Ends `holdDispatch`: the held requests are dispatched in order, then reading resumes
    /// (unless backpressure or another hold stops it again).
    func releaseDispatch() {
        guard dispatchHeld else { return }
        dispatchHeld = false
        guard !isClosing, let bev else { return }
        performPending()
        guard !dispatchHeld, !isClosing, closing == nil else { closeIfAnswered(); return }
        // Paused for backpressure meanwhile: reading resumes as that pause ends (not before).
        if readPaused { resumeReadingIfCaughtUp(); return }
        bufferevent_enable(bev, Int16(EV_READ))
        readable()
    }

    /// See `ClientSession.shareApp(_:)`.
    func shareApp(_ app: String) { session.shareApp(app) }

    /// Carries out the session's actions in order, each moved out of the queue (`popFirst`):
    /// iterating over an array would copy each one, retaining and releasing a request's strings
    /// and arrays once more.
    private func performPending() {
        while !dispatchHeld, let action = pendingActions.popFirst() {
            switch action {
            case .send(let bytes): send(bytes)
            case .dispatch(let request): delegate?.handle(request, from: self)
            case .close(let reason): close(reason: reason)
            case .closeAfterReplies(let line, let reason): closeAfterReplies(line, reason: reason)
            case .warn(let message): delegate?.connectionWarning(self, message)
            }
        }
    }

    private static func peerName(_ fd: Int32) -> String {
        var addr = sockaddr_in()
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &len) }
        }
        guard ok == 0 else { return "unknown" }
        var buffer = [CChar](repeating: 0, count: 32)
        inet_ntop(AF_INET, &addr.sin_addr, &buffer, 32)
        return "\(String(cBuffer: buffer)):\(UInt16(bigEndian: addr.sin_port))"
    }
}

/// The connections' reference to their delegate, shared by all of them and cleared by the
/// delegate when it goes: `weak` without a side table (see `Unretained`).
final class ConnectionDelegateRef {
    unowned(unsafe) var delegate: (any ConnectionDelegate)?
    init() {}
}

/// What a connection needs from the service.
protocol ConnectionDelegate: AnyObject {
    func handle(_ request: ClientSession.Request, from connection: ClientConnection)
    func connectionClosing(_ connection: ClientConnection, reason: String)
    /// A refusal worth auditing (see `ClientSession.Action.warn`).
    func connectionWarning(_ connection: ClientConnection, _ message: String)
    func connectionClosed(_ connection: ClientConnection)
}
