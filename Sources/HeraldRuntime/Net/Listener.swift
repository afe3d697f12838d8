// The TCP listener: accepts connections and hands their sockets to the service.
import CLibEvent
import Glibc

/// A libevent `evconnlistener` bound to host:port. Accepted sockets are non-blocking.
public final class Listener {
    private var listener: OpaquePointer?
    private let onAccept: (Int32) -> Void
    /// Strong: the event_base must outlive the listener created on it.
    private let loop: EventLoop
    /// The port actually bound (useful when asked for port 0).
    public private(set) var port: Int = 0

    /// Told once per episode of failing `accept` (out of descriptors, memory): the listener then
    /// pauses for `acceptPauseMilliseconds` instead of being woken for the same error at once.
    private let onAcceptError: (String) -> Void
    /// How long the listener rests after `accept` failed (the backlog's clients wait meanwhile).
    public static let acceptPauseMilliseconds: Int64 = 1_000
    private var pause: LoopEvent?
    private var failing = false
    /// Failed attempts in the current episode (reported when accepting works again).
    private var episodeFailures = 0
    /// Times `accept` failed (exposed in stats).
    public private(set) var acceptFailures = 0

    /// `flag` names the option the address came from, in the error when it does not parse.
    public init(loop: EventLoop, host: String, port: Int, flag: String = "--listen", backlog: Int32 = 1024, onAccept: @escaping (Int32) -> Void,
                onAcceptError: @escaping (String) -> Void = { _ in }) throws(ServiceError) {
        self.onAccept = onAccept
        self.onAcceptError = onAcceptError
        self.loop = loop
        var addr = try Self.address(host: host, port: port, flag: flag)
        // Unretained: the Listener owns the evconnlistener and frees it in deinit.
        let context = Unmanaged.passUnretained(self).toOpaque()
        let flags = UInt32(LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC)
        listener = withUnsafePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                evconnlistener_new_bind(loop.base, { _, fd, _, _, context in
                    let listener = Unmanaged<Listener>.fromOpaque(context!).takeUnretainedValue()
                    listener.accepted()
                    listener.onAccept(fd)
                }, context, flags, backlog, sa, Int32(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard let listener else { throw Self.cannotListen(host: host, port: port, errno) }
        // Without an error callback libevent logs "Error from accept() call" and is woken again at
        // once: out of descriptors, that is a busy loop writing megabytes of log a second.
        evconnlistener_set_error_cb(listener) { _, context in
            Unmanaged<Listener>.fromOpaque(context!).takeUnretainedValue().acceptFailed(errno)
        }
        var bound = sockaddr_in()
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &bound) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(evconnlistener_get_fd(listener), $0, &len) }
        }
        self.port = Int(UInt16(bigEndian: bound.sin_port))
    }

    /// `host:port` as an IPv4 socket address ("localhost" is 127.0.0.1).
    private static func address(host: String, port: Int, flag: String) throws(ServiceError) -> sockaddr_in {
        guard (0...65_535).contains(port) else { throw .configuration("\(flag) port \(port) is not a TCP port (0–65535).") }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        guard inet_pton(AF_INET, host == "localhost" ? "127.0.0.1" : host, &addr.sin_addr) == 1 else {
            throw .configuration("\(flag) host “\(host)” is not an IPv4 address; use e.g. 127.0.0.1 or 0.0.0.0.")
        }
        return addr
    }

    private static func cannotListen(host: String, port: Int, _ code: Int32) -> ServiceError {
        .configuration("Could not listen on \(host):\(port): \(String(cString: strerror(code))). Is another process using the port?")
    }

    /// Binds a socket to `host:port` as the listener will (SO_REUSEADDR, like LEV_OPT_REUSEABLE) and
    /// closes it again: `serve` checks its addresses this way before any database work, which at
    /// start-up (migrations, a restore) can take minutes before the listener is made.
    public static func checkAvailable(host: String, port: Int, flag: String = "--listen") throws(ServiceError) {
        var addr = try address(host: host, port: port, flag: flag)
        guard port != 0 else { return }
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return }
        defer { close(fd) }
        var on: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
        let bound = withUnsafePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        if bound != 0 { throw cannotListen(host: host, port: port, errno) }
    }

    /// `accept` failed for a reason retrying at once will not cure (EMFILE, ENFILE, ENOBUFS…):
    /// rest, say so once, try again later. Connections waiting in the backlog are accepted then.
    private func acceptFailed(_ code: Int32) {
        acceptFailures += 1
        episodeFailures += 1
        guard let listener else { return }
        evconnlistener_disable(listener)
        if !failing {
            failing = true
            let why = code == EMFILE || code == ENFILE
                ? "the process is out of file descriptors (\(String(cString: strerror(code)))); raise its limit (ulimit -n, systemd LimitNOFILE=) or lower --max-connections"
                : String(cString: strerror(code))
            onAcceptError("cannot accept connections: \(why). Pausing \(Self.acceptPauseMilliseconds) ms between attempts; existing connections carry on")
        }
        if pause == nil {
            pause = loop.timer { [weak self] in self?.resume() }
        }
        pause?.arm(afterMilliseconds: Self.acceptPauseMilliseconds)
    }

    private func resume() {
        guard let listener else { return }
        evconnlistener_enable(listener)
    }

    /// An `accept` succeeded after failures: the next failure is reported again.
    func accepted() {
        guard failing else { return }
        failing = false
        onAcceptError("accepting connections again after \(episodeFailures) failed attempts")
        episodeFailures = 0
    }

    /// Stops accepting (graceful shutdown) without closing existing connections.
    public func disable() {
        pause?.disarm()
        if let listener { evconnlistener_disable(listener) }
    }

    deinit {
        if let listener { evconnlistener_free(listener) }
    }
}

/// Errors of the service layer, written for operators.
public enum ServiceError: Error, CustomStringConvertible {
    case configuration(String)
    public var description: String {
        switch self {
        case .configuration(let m): return m
        }
    }
}
