// A pipelined protocol connection from a router to a partition's owner: a local partition service or another instance.
import CLibEvent
import DequeModule
import Glibc
import HeraldCore

/// One connection to an owner, speaking the client protocol (SPEC §5): a hello with the router's
/// token, then requests written as they come (pipelined) and their replies matched in order.
/// Delivery lines (a consumer link's) and `goodbye` are not replies and go to their handlers.
/// When the connection ends, every request still unanswered is handed back (`onLost`) so the
/// router can send it again once it knows the partition's owner.
final class UpstreamLink {
    /// A request's reply: the line without its newline.
    typealias ReplyHandler = ([UInt8]) -> Void

    struct Pending {
        var line: [UInt8]
        /// The sender's note of what the request is for (the router's: its partition).
        var tag: Int
        var handler: ReplyHandler
        /// The router's request (who sent it, since when it waits), handed back with it when the link ends.
        var request: ForwardedRequest? = nil
    }

    let address: String
    let loop: EventLoop
    private var bev: OpaquePointer?
    private var framer = LineFramer(maxLineBytes: 64 << 20)
    /// Requests written and not yet answered, oldest first (the hello's first).
    private var pending: Deque<Pending> = []
    private(set) var isClosed = false
    /// The owner said goodbye: it answers what it read and closes; nothing more is sent on this link.
    private(set) var saidGoodbye = false
    /// Delivery lines and other lines that are not replies (a consumer link).
    var onLine: ((UnsafeRawBufferPointer) -> Void)?
    /// The link ended (closed by the owner, refused, or failed): the requests never answered.
    var onLost: (([Pending], String) -> Void)?
    /// Bytes queued to the owner and not yet written (backpressure for the router).
    var outputBytes: Int { bev.map { evbuffer_get_length(bufferevent_get_output($0)) } ?? 0 }
    private let unretained = Unretained<UpstreamLink>()

    /// Connects to `address` (host:port; a name is resolved once, blocking) and says hello with
    /// `token` (nil: a dev-mode owner). A failure to connect is reported through `onLost` from the loop.
    init(loop: EventLoop, address: String, token: String?) {
        self.loop = loop
        self.address = address
        unretained.object = self
        var hello: [String: JSONValue] = ["op": "hello"]
        if let token { hello["token"] = .string(token) }
        pending.append(Pending(line: WireReply.line(.object(hello)), tag: -1, handler: { [unretained] line in
            guard let self = unretained.object else { return }
            self.helloAnswered = true
            if (try? JSONValue.parse(line))?["ok"] != .bool(true) {
                self.fail("the owner at \(address) refused the router's hello: \(String(decoding: line, as: UTF8.self))")
            }
        }))
        guard let made = bufferevent_socket_new(loop.base, -1, Int32(BEV_OPT_CLOSE_ON_FREE.rawValue)) else {
            failSoon("libevent could not make a socket")
            return
        }
        bev = made
        let context = Unmanaged.passUnretained(self).toOpaque()
        bufferevent_setcb(made, { _, context in
            Unmanaged<UpstreamLink>.fromOpaque(context!).takeUnretainedValue().readable()
        }, nil, { _, what, context in
            Unmanaged<UpstreamLink>.fromOpaque(context!).takeUnretainedValue().event(what)
        }, context)
        bufferevent_enable(made, Int16(EV_READ | EV_WRITE))
        guard var storage = Self.resolve(address) else {
            failSoon("cannot resolve \(address)")
            return
        }
        let connected = withUnsafePointer(to: &storage.address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bufferevent_socket_connect(made, $0, Int32(storage.length)) }
        }
        guard connected == 0 else {
            failSoon("cannot connect to \(address): \(String(cString: strerror(errno)))")
            return
        }
        let line = pending[0].line
        _ = line.withUnsafeBytes { bufferevent_write(made, $0.baseAddress, $0.count) }
        // An owner that accepts nothing (a listener being closed keeps completing handshakes into its
        // backlog) would hold every request sent here: without a hello reply in time, the link fails.
        helloTimer = loop.timer { [unretained] in
            guard let self = unretained.object, !self.helloAnswered else { return }
            self.fail("the owner at \(address) did not answer hello within \(Self.helloMilliseconds) ms")
        }
        helloTimer?.arm(afterMilliseconds: Self.helloMilliseconds)
    }

    static let helloMilliseconds: Int64 = 2_000
    private var helloTimer: LoopEvent?
    private var helloAnswered = false

    deinit {
        unretained.object = nil
        if let bev { bufferevent_free(bev) }
    }

    /// Writes `line` (a request, newline-terminated) and calls `handler` with its reply. On a link
    /// that is closed or said goodbye, the request is handed back through `onLost` at once.
    func send(_ line: [UInt8], tag: Int = 0, request: ForwardedRequest? = nil, _ handler: @escaping ReplyHandler) {
        guard let bev, !isClosed, !saidGoodbye else {
            handBackSoon([Pending(line: line, tag: tag, handler: handler, request: request)],
                         saidGoodbye ? "the owner is handing the partition over" : "the link is closed")
            return
        }
        pending.append(Pending(line: line, tag: tag, handler: handler, request: request))
        _ = line.withUnsafeBytes { bufferevent_write(bev, $0.baseAddress, $0.count) }
    }

    /// Closes without handing anything back (the router is done with it).
    func close() {
        guard !isClosed else { return }
        isClosed = true
        pending.removeAll()
        if let bev { bufferevent_disable(bev, Int16(EV_READ | EV_WRITE)) }
    }

    private func readable() {
        guard let bev, !isClosed else { return }
        let input = bufferevent_get_input(bev)
        while !isClosed {
            let length = evbuffer_get_length(input)
            if length == 0 { break }
            var vector = iovec()
            guard evbuffer_peek(input, -1, nil, &vector, 1) >= 1, let base = vector.iov_base else { break }
            let chunk = UnsafeRawBufferPointer(start: base, count: vector.iov_len)
            let ok = framer.feedLines(chunk) { line in self.lineReceived(line) }
            evbuffer_drain(input, vector.iov_len)
            if !ok { fail("the owner at \(address) sent a line over the router's limit"); return }
        }
    }

    private func lineReceived(_ line: UnsafeRawBufferPointer) {
        switch Self.kind(of: line) {
        case .delivery:
            onLine?(line)
        case .goodbye:
            saidGoodbye = true
        case .reply:
            if let first = pending.popFirst() {
                first.handler(Array(line))
            } else {
                onLine?(line)  // an unsolicited line (a consumer deleted): the client's to see
            }
        }
    }

    private func event(_ what: Int16) {
        if what & Int16(BEV_EVENT_CONNECTED) != 0 { return }
        let why = what & Int16(BEV_EVENT_EOF) != 0 ? "the owner at \(address) closed the connection"
            : "the connection to \(address) failed: \(String(cString: strerror(errno)))"
        fail(why)
    }

    private func fail(_ why: String) {
        guard !isClosed else { return }
        isClosed = true
        if let bev { bufferevent_disable(bev, Int16(EV_READ | EV_WRITE)) }
        var lost = Array(pending)
        pending.removeAll()
        // The hello is the router's own: not handed back.
        if lost.first?.tag == -1 { lost.removeFirst() }
        onLost?(lost, why)
    }

    private func failSoon(_ why: String) {
        isClosed = true
        var lost = Array(pending)
        pending.removeAll()
        lost.removeFirst()
        handBackSoon(lost, why)
    }

    /// Requests handed back from the loop's next turn, never from inside the caller's `send`.
    private var handBack: (requests: [Pending], why: String)?
    private var handBackEvent: LoopEvent?

    private func handBackSoon(_ requests: [Pending], _ why: String) {
        if handBack == nil { handBack = ([], why) }
        handBack!.requests += requests
        if handBackEvent == nil {
            handBackEvent = loop.timer { [unretained] in
                guard let self = unretained.object, let back = self.handBack else { return }
                self.handBack = nil
                self.onLost?(back.requests, back.why)
            }
        }
        handBackEvent?.arm(afterMilliseconds: 0)
    }

    enum LineKind { case delivery, goodbye, reply }

    /// A delivery line starts `{"cursor":n,"op":"delivery"`; a goodbye `{"op":"goodbye"`; any other
    /// line is a reply.
    static func kind(of line: UnsafeRawBufferPointer) -> LineKind {
        let cursorHead = #"{"cursor":"#.utf8, goodbyeHead = #"{"op":"goodbye""#.utf8
        if line.starts(with: cursorHead) {
            var i = cursorHead.count
            while i < line.count, line[i] >= 0x30 && line[i] <= 0x39 { i += 1 }
            if line[i...].starts(with: #","op":"delivery""#.utf8) { return .delivery }
        }
        if line.starts(with: goodbyeHead) { return .goodbye }
        return .reply
    }

    /// `host:port` as a socket address (IPv4 or IPv6; a name through getaddrinfo).
    static func resolve(_ address: String) -> (address: sockaddr_storage, length: Int)? {
        guard let colon = address.lastIndex(of: ":"), let port = Int(address[address.index(after: colon)...]) else { return nil }
        var host = String(address[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var result: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &result) == 0, let first = result else { return nil }
        defer { freeaddrinfo(result) }
        var storage = sockaddr_storage()
        let length = Int(first.pointee.ai_addrlen)
        withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: UnsafeRawBufferPointer(start: first.pointee.ai_addr, count: length)) }
        return (storage, length)
    }
}

