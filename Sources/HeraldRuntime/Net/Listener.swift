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

    public init(loop: EventLoop, host: String, port: Int, backlog: Int32 = 1024, onAccept: @escaping (Int32) -> Void) throws(ServiceError) {
        self.onAccept = onAccept
        self.loop = loop
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        guard inet_pton(AF_INET, host == "localhost" ? "127.0.0.1" : host, &addr.sin_addr) == 1 else {
            throw .configuration("--listen host “\(host)” is not an IPv4 address; use e.g. 127.0.0.1 or 0.0.0.0.")
        }
        // Unretained: the Listener owns the evconnlistener and frees it in deinit.
        let context = Unmanaged.passUnretained(self).toOpaque()
        let flags = UInt32(LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC)
        listener = withUnsafePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                evconnlistener_new_bind(loop.base, { _, fd, _, _, context in
                    Unmanaged<Listener>.fromOpaque(context!).takeUnretainedValue().onAccept(fd)
                }, context, flags, backlog, sa, Int32(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard let listener else {
            throw .configuration("Could not listen on \(host):\(port): \(String(cString: strerror(errno))). Is another process using the port?")
        }
        var bound = sockaddr_in()
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &bound) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(evconnlistener_get_fd(listener), $0, &len) }
        }
        self.port = Int(UInt16(bigEndian: bound.sin_port))
    }

    /// Stops accepting (graceful shutdown) without closing existing connections.
    public func disable() {
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
