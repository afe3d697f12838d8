// A small blocking client of Herald's line protocol (plain TCP or TLS, read time-outs) for the tests, the benches and `herald health`.
import Foundation
import Glibc
import HeraldCore

/// Newline-delimited JSON over a blocking socket (plain, or TLS with `tls:`) with read time-outs.
/// `@unchecked Sendable`: one thread may read while another writes (reads touch only the read
/// buffer, writes only the socket); two readers or two writers at once are not allowed.
public final class WireClient: @unchecked Sendable {
    public enum Failure: Error, CustomStringConvertible {
        case connect(String), closed, timeout, io(String)
        public var description: String {
            switch self {
            case .connect(let m): return "could not connect: \(m)"
            case .closed: return "the server closed the connection"
            case .timeout: return "no reply in time"
            case .io(let m): return m
            }
        }
    }

    private var fd: Int32
    private var buffer: [UInt8] = []
    /// Where the unread part of `buffer` starts: lines are consumed by moving it, and the buffer
    /// is compacted only when it is refilled (removing each line from the front copied the whole
    /// rest every time: quadratic when thousands of pipelined replies arrive at once).
    private var bufferStart = 0
    private var tls: TLSClientSession?

    /// Connects; with `tls` the TLS handshake is done before this returns (or throws `.connect`).
    public init(host: String = "127.0.0.1", port: Int, tls options: TLSClientOptions? = nil) throws(Failure) {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        if inet_pton(AF_INET, host == "localhost" ? "127.0.0.1" : host, &addr.sin_addr) != 1 {
            // A host name (`herald tail --connect herald.internal:7411`): its first IPv4 address.
            // Without this an unresolvable name would be tried as 0.0.0.0 and read "Connection refused".
            var hints = addrinfo()
            hints.ai_family = AF_INET
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
            var found: UnsafeMutablePointer<addrinfo>?
            let status = getaddrinfo(host, nil, &hints, &found)
            guard status == 0, let first = found, let address = first.pointee.ai_addr else {
                if status == 0 { freeaddrinfo(found) }
                Glibc.close(fd)
                fd = -1
                throw .connect("\(host):\(port): cannot resolve the host name (\(String(cString: gai_strerror(status)))); check the name, or give an IPv4 address")
            }
            addr.sin_addr = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr }
            freeaddrinfo(found)
        }
        let rc = withUnsafePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        if rc != 0 {
            let m = String(cString: strerror(errno))
            // -1 before throwing: the object is fully initialized, so `deinit` runs and would
            // close the number again — by then perhaps another thread's descriptor.
            Glibc.close(fd)
            fd = -1
            throw .connect("\(host):\(port): \(m)")
        }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        if let options {
            do {
                tls = try TLSClientSession(fd: fd, host: host == "localhost" ? "127.0.0.1" : host, options: options)
            } catch {
                Glibc.close(fd)
                fd = -1
                throw error
            }
        }
    }

    /// The negotiated TLS protocol ("TLSv1.3"), nil on a plaintext connection.
    public var tlsProtocol: String? { tls?.protocolVersion }

    deinit { close() }

    /// The socket (benchmarks take it over with `dup` after the handshake; see `DeliveryTap`).
    public var fileDescriptor: Int32 { fd }

    public func close() {
        tls?.shutdown()
        tls = nil
        if fd >= 0 { Glibc.close(fd) }
        fd = -1
    }

    /// Sends raw bytes as they are (tests of framing send partial or oversized lines this way).
    public func sendRaw(_ bytes: [UInt8]) throws(Failure) {
        var offset = 0
        if let tls {
            if bytes.isEmpty { return }
            try tls.write(bytes)
            return
        }
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if n <= 0 { throw .io("write failed: \(String(cString: strerror(errno)))") }
            offset += n
        }
    }

    /// Writes as much of `bytes` as the socket takes without blocking (no SIGPIPE); returns
    /// how many were written, or nil once the connection is broken (reset or closed).
    /// Hostile-client tests trickle bytes or flood a socket this way.
    public func trySend(_ bytes: [UInt8]) -> Int? {
        let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT | MSG_NOSIGNAL)) }
        if n >= 0 { return n }
        return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : nil
    }

    /// Shrinks the socket's receive buffer, so that a client that does not read fills up fast.
    public func setReceiveBuffer(bytes: Int32) {
        var size = bytes
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Whether the server has closed (or reset) the connection: reads and drops what is
    /// buffered, without waiting.
    public func isClosedByPeer() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if n > 0 { buffer += chunk[..<n]; continue }
            if n == 0 { return true }
            return !(errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        }
    }

    /// Lines received so far and not yet read (after `isClosedByPeer`).
    public func bufferedLines() -> [[UInt8]] {
        buffer[bufferStart...].split(separator: 0x0A, omittingEmptySubsequences: true).map(Array.init)
    }

    /// Sends one line (a newline is added).
    public func send(_ line: String) throws(Failure) {
        try sendRaw(Array((line + "\n").utf8))
    }

    /// The next line, waiting at most `timeoutMilliseconds`; nil on time-out.
    public func readLine(timeoutMilliseconds: Int32 = 10_000) throws(Failure) -> [UInt8]? {
        while true {
            if let nl = buffer[bufferStart...].firstIndex(of: 0x0A) {
                let line = Array(buffer[bufferStart..<nl])
                bufferStart = nl + 1
                return line
            }
            buffer.removeSubrange(..<bufferStart)
            bufferStart = 0
            if (tls?.pending ?? 0) == 0 {
                var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                let ready = poll(&p, 1, timeoutMilliseconds)
                if ready == 0 { return nil }
                if ready < 0 { if errno == EINTR { continue }; throw .io("poll failed") }
            }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let n: Int
            if let tls {
                n = try tls.read(into: &chunk)
            } else {
                n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            }
            if n == 0 { throw .closed }
            if n < 0 { throw .io("read failed: \(String(cString: strerror(errno)))") }
            buffer += chunk[..<n]
        }
    }

    /// The next line parsed as JSON; throws on time-out.
    public func readJSON(timeoutMilliseconds: Int32 = 10_000) throws -> JSONValue {
        guard let line = try readLine(timeoutMilliseconds: timeoutMilliseconds) else { throw Failure.timeout }
        return try JSONValue.parse(line)
    }

    /// Sends a request and returns the next line as JSON (use only when no deliveries interleave).
    public func request(_ line: String, timeoutMilliseconds: Int32 = 10_000) throws -> JSONValue {
        try send(line)
        return try readJSON(timeoutMilliseconds: timeoutMilliseconds)
    }
}
