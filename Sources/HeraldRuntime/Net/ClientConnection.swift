// One client's TCP connection: bytes in through the framer and session, replies and deliveries out.
import CLibEvent
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
    private weak var delegate: ConnectionDelegate?
    public private(set) var isClosing = false
    private var readPaused = false
    private var finished = false
    /// TLS connections only: whether the client's certificate has been looked at (after the handshake).
    private var peerChecked: Bool
    /// Called (once) when the output drains below the low-water mark; consumers resume on it.
    public var onDrained: (() -> Void)?

    /// Bound on unanswered requests before we stop reading from this client (backpressure).
    public static let maxOutstanding = 4096

    /// With `tls`, the bufferevent speaks TLS (the handshake runs before any line is read).
    init(id: UInt64, fd: Int32, loop: EventLoop, session: ClientSession, maxLineBytes: Int, delegate: ConnectionDelegate,
         tls: TLSContext? = nil) {
        self.id = id
        self.loop = loop
        self.session = session
        self.framer = LineFramer(maxLineBytes: maxLineBytes)
        self.delegate = delegate
        self.peer = Self.peerName(fd)
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        peerChecked = tls == nil
        bev = tls?.bufferevent(base: loop.base, fd: fd) ?? bufferevent_socket_new(loop.base, fd, Int32(BEV_OPT_CLOSE_ON_FREE.rawValue))
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
    }

    deinit {
        if let bev { bufferevent_free(bev) }
    }

    /// Bytes queued for the client and not yet written to the socket.
    public var outputBytes: Int {
        guard let bev else { return 0 }
        return evbuffer_get_length(bufferevent_get_output(bev))
    }

    /// Sets idle/hello timeouts: no byte read for this long closes the connection.
    public func setReadTimeout(milliseconds: Int64?) {
        guard let bev else { return }
        if let ms = milliseconds {
            var tv = timeval(tv_sec: Int(ms / 1000), tv_usec: Int((ms % 1000) * 1000))
            bufferevent_set_timeouts(bev, &tv, nil)
        } else {
            bufferevent_set_timeouts(bev, nil, nil)
        }
    }

    // MARK: Output

    public func send(_ bytes: [UInt8]) {
        guard let bev, !bytes.isEmpty else { return }
        bytes.withUnsafeBytes { _ = bufferevent_write(bev, $0.baseAddress, $0.count) }
    }

    /// The answer to a dispatched request; sent when every earlier reply has been.
    public func complete(ticket: UInt64, reply: [UInt8]) {
        guard !isClosing || bev != nil else { return }
        perform(session.replyCompleted(ticket: ticket, reply: reply))
        if readPaused && session.outstanding < Self.maxOutstanding / 2 {
            readPaused = false
            bufferevent_enable(bev, Int16(EV_READ))
            readable()
        }
    }

    /// The tokens file was reloaded: re-check this connection's grant (it may be closed).
    public func tokensReloaded(_ table: TokenTable) {
        perform(session.tokensReloaded(table))
    }

    /// Ends the connection: stops reading, lets queued output drain, then frees it. The reason is logged.
    public func close(reason: String) {
        guard !isClosing else { return }
        isClosing = true
        delegate?.connectionClosing(self, reason: reason)
        guard let bev else { return }
        bufferevent_disable(bev, Int16(EV_READ))
        if outputBytes == 0 { finish() }
    }

    /// Frees the connection (once): called when queued output drained after `close`, or at once
    /// when the peer is gone.
    private func finish(peerGone: Bool = false) {
        guard let bev, !finished else { return }
        finished = true
        bufferevent_disable(bev, Int16(EV_READ | EV_WRITE))
        if !peerGone { TLSContext.sendCloseNotify(bev) }
        shutdown(bufferevent_getfd(bev), Int32(SHUT_RDWR))
        delegate?.connectionClosed(self)
    }

    // MARK: Callbacks

    private func readable() {
        guard let bev, !isClosing else { return }
        if !peerChecked { peerHandshakeCompleted() }
        let input = bufferevent_get_input(bev)
        while !isClosing && !readPaused {
            let length = evbuffer_get_length(input)
            if length == 0 { break }
            var vector = iovec()  // evbuffer_iovec is a macro for struct iovec
            guard evbuffer_peek(input, -1, nil, &vector, 1) >= 1, let base = vector.iov_base else { break }
            let chunk = UnsafeRawBufferPointer(start: base, count: vector.iov_len)
            var actions: [ClientSession.Action] = []
            let ok = framer.feed(chunk) { line in actions += session.lineReceived(line) }
            evbuffer_drain(input, vector.iov_len)
            perform(actions)
            if !ok {
                send(WireReply.error(rid: nil, .lineTooLong(limit: framer.maxLineBytes)))
                close(reason: "sent a line over \(framer.maxLineBytes) bytes")
                return
            }
            if session.outstanding >= Self.maxOutstanding {
                // Backpressure: stop reading until replies catch up (TCP pushes back on the client).
                readPaused = true
                bufferevent_disable(bev, Int16(EV_READ))
            }
        }
    }

    private func writable() {
        if isClosing { finish(); return }
        onDrained?()
    }

    private func event(_ what: Int16) {
        if what & Int16(BEV_EVENT_CONNECTED) != 0 {
            if !peerChecked { peerHandshakeCompleted() }
        } else if what & Int16(BEV_EVENT_EOF) != 0 {
            // The peer is gone: nothing queued for it can be delivered any more.
            close(reason: "client closed the connection")
            finish(peerGone: true)
        } else if what & Int16(BEV_EVENT_TIMEOUT) != 0 {
            if !peerChecked {
                // The TLS handshake never finished: nothing can be written to this client.
                close(reason: "no TLS handshake before the hello timeout")
                finish(peerGone: true)
                return
            }
            if session.grant == nil {
                send(WireReply.error(rid: nil, RequestError(code: "hello_timeout", title: "No hello in time",
                    detail: "A connection must say hello within the hello timeout. Reconnect and send hello first.")))
            }
            close(reason: session.grant == nil ? "no hello before the hello timeout" : "idle past the idle timeout")
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
        for action in actions {
            switch action {
            case .send(let bytes): send(bytes)
            case .dispatch(let request): delegate?.handle(request, from: self)
            case .close(let reason): close(reason: reason)
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
        return "\(String(cString: buffer)):\(UInt16(bigEndian: addr.sin_port))"
    }
}

/// What a connection needs from the service.
protocol ConnectionDelegate: AnyObject {
    func handle(_ request: ClientSession.Request, from connection: ClientConnection)
    func connectionClosing(_ connection: ClientConnection, reason: String)
    func connectionClosed(_ connection: ClientConnection)
}
