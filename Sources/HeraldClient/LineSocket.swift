// One connected socket, plain TCP or TLS (OpenSSL): connected and handshaken blocking, then used non-blocking.
internal import COpenSSL
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How the client speaks TLS to Herald.
public struct TLSOptions: Sendable, Hashable {
    /// PEM CA file that signed the server's certificate; nil uses the system's trust store.
    public var caFile: String?
    /// A client certificate and its key (PEM), for certificate-mapped grants.
    public var certificateFile: String?
    public var keyFile: String?
    /// The name to verify in the server's certificate (default: the host connected to).
    public var serverName: String?

    public init(caFile: String? = nil, certificateFile: String? = nil, keyFile: String? = nil, serverName: String? = nil) {
        self.caFile = caFile; self.certificateFile = certificateFile; self.keyFile = keyFile; self.serverName = serverName
    }
}

/// The outcome of one non-blocking read or write.
enum SocketIO {
    case bytes(Int)
    /// Try again when the socket is readable (`wantsWrite` false) or writable (true).
    case wouldBlock(wantsWrite: Bool)
    case closed
    case failed(String)
}

final class LineSocket {
    private(set) var fd: Int32
    private var ssl: OpaquePointer?

    private init(fd: Int32, ssl: OpaquePointer?) { self.fd = fd; self.ssl = ssl }

    /// Connects (each resolved address in turn), does the TLS handshake, then makes the socket non-blocking.
    /// `timeoutSeconds` bounds the connect and the handshake.
    static func open(host: String, port: Int, tls: TLSOptions?, timeoutSeconds: Int = 10) throws(HeraldError) -> LineSocket {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        #if canImport(Glibc)
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #else
        hints.ai_socktype = SOCK_STREAM
        #endif
        var found: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &found)
        guard status == 0, let first = found else {
            throw HeraldError(code: "connect_failed", title: "\(host):\(port): cannot resolve the host name",
                              detail: "\(String(cString: gai_strerror(status))); check the name, or give an IP address.")
        }
        defer { freeaddrinfo(found) }
        var lastError = "no address"
        var candidate: UnsafeMutablePointer<addrinfo>? = first
        while let a = candidate {
            candidate = a.pointee.ai_next
            // Close-on-exec: a process the application starts must not inherit the connection, or
            // it would hold it open after `close()` and the server would never see it end.
            #if canImport(Glibc)
            let fd = socket(a.pointee.ai_family, a.pointee.ai_socktype | Int32(SOCK_CLOEXEC.rawValue), a.pointee.ai_protocol)
            #else
            let fd = socket(a.pointee.ai_family, a.pointee.ai_socktype, a.pointee.ai_protocol)
            if fd >= 0 { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
            #endif
            if fd < 0 { lastError = String(cString: strerror(errno)); continue }
            var limit = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
            if connect(fd, a.pointee.ai_addr, a.pointee.ai_addrlen) != 0 {
                lastError = String(cString: strerror(errno))
                closeDescriptor(fd)
                continue
            }
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            #if canImport(Darwin)
            setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
            #endif
            var ssl: OpaquePointer?
            if let tls {
                do { ssl = try handshake(fd: fd, host: tls.serverName ?? host, options: tls) } catch {
                    closeDescriptor(fd)
                    throw error
                }
            }
            var none = timeval(tv_sec: 0, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &none, socklen_t(MemoryLayout<timeval>.size))
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &none, socklen_t(MemoryLayout<timeval>.size))
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            return LineSocket(fd: fd, ssl: ssl)
        }
        throw HeraldError(code: "connect_failed", title: "Cannot connect to \(host):\(port): \(lastError)", detail: "Is herald serve listening there?")
    }

    private static func handshake(fd: Int32, host: String, options: TLSOptions) throws(HeraldError) -> OpaquePointer {
        // A write to a peer that closed raises SIGPIPE inside OpenSSL's socket writes: ignore it, as servers do.
        signal(SIGPIPE, SIG_IGN)
        func failure(_ what: String) -> HeraldError {
            var buffer = [CChar](repeating: 0, count: 1024)
            herald_client_drain_errors(&buffer, buffer.count)
            let detail = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            return HeraldError(code: "tls_failed", title: "TLS with \(host) failed: \(what)", detail: detail)
        }
        ERR_clear_error()
        guard let ctx = SSL_CTX_new(TLS_client_method()) else { throw failure("no TLS context") }
        defer { SSL_CTX_free(ctx) }  // the SSL keeps its own reference
        herald_client_set_nonblocking_modes(ctx)
        if let ca = options.caFile {
            guard SSL_CTX_load_verify_locations(ctx, ca, nil) == 1 else { throw failure("cannot load the CA file \(ca)") }
        } else {
            SSL_CTX_set_default_verify_paths(ctx)
        }
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nil)
        if let cert = options.certificateFile, let key = options.keyFile {
            guard SSL_CTX_use_certificate_chain_file(ctx, cert) == 1, SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) == 1 else {
                throw failure("cannot load the client certificate \(cert)")
            }
        }
        guard let ssl = SSL_new(ctx) else { throw failure("no TLS session") }
        SSL_set_fd(ssl, fd)
        var probe = in6_addr()
        if inet_pton(AF_INET, host, &probe) == 1 || inet_pton(AF_INET6, host, &probe) == 1 {
            _ = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host)
        } else {
            _ = SSL_set1_host(ssl, host)
            _ = herald_client_set_server_name(ssl, host)
        }
        if SSL_connect(ssl) != 1 {
            let verify = SSL_get_verify_result(ssl)
            let error = verify == X509_V_OK ? failure("handshake") :
                HeraldError(code: "tls_failed", title: "TLS with \(host) failed: the server's certificate did not verify",
                            detail: String(cString: X509_verify_cert_error_string(Int(verify))))
            SSL_free(ssl)
            throw error
        }
        return ssl
    }

    var tlsProtocol: String? { ssl.map { String(cString: herald_client_tls_version($0)) } }

    /// Bytes OpenSSL has decrypted already (a poll on the socket would not see them).
    var hasBufferedInput: Bool { ssl.map { SSL_pending($0) > 0 } ?? false }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> SocketIO {
        if let ssl {
            ERR_clear_error()
            let n = SSL_read(ssl, buffer.baseAddress, Int32(buffer.count))
            if n > 0 { return .bytes(Int(n)) }
            return sslOutcome(ssl, n)
        }
        let n = recv(fd, buffer.baseAddress, buffer.count, 0)
        if n > 0 { return .bytes(n) }
        if n == 0 { return .closed }
        if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { return .wouldBlock(wantsWrite: false) }
        return .failed(String(cString: strerror(errno)))
    }

    func write(_ buffer: UnsafeRawBufferPointer) -> SocketIO {
        if let ssl {
            ERR_clear_error()
            let n = SSL_write(ssl, buffer.baseAddress, Int32(min(buffer.count, Int(Int32.max))))
            if n > 0 { return .bytes(Int(n)) }
            return sslOutcome(ssl, n)
        }
        #if canImport(Glibc)
        let n = send(fd, buffer.baseAddress, buffer.count, Int32(MSG_NOSIGNAL))
        #else
        let n = send(fd, buffer.baseAddress, buffer.count, 0)  // SO_NOSIGPIPE is set at open
        #endif
        if n >= 0 { return .bytes(n) }
        if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { return .wouldBlock(wantsWrite: true) }
        return .failed(String(cString: strerror(errno)))
    }

    private func sslOutcome(_ ssl: OpaquePointer, _ n: Int32) -> SocketIO {
        switch SSL_get_error(ssl, n) {
        case SSL_ERROR_WANT_READ: return .wouldBlock(wantsWrite: false)
        case SSL_ERROR_WANT_WRITE: return .wouldBlock(wantsWrite: true)
        case SSL_ERROR_ZERO_RETURN: return .closed
        case SSL_ERROR_SYSCALL:
            return errno == 0 || errno == ECONNRESET || errno == EPIPE ? .closed : .failed(String(cString: strerror(errno)))
        default:
            var buffer = [CChar](repeating: 0, count: 512)
            herald_client_drain_errors(&buffer, buffer.count)
            return .failed("TLS: " + String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
    }

    func close() {
        if let ssl {
            _ = SSL_shutdown(ssl)
            SSL_free(ssl)
            self.ssl = nil
        }
        if fd >= 0 {
            // The connection ends at the server now (FIN after what is queued), even if a process
            // forked without exec still holds a copy of the descriptor (close-on-exec covers exec).
            #if canImport(Glibc)
            _ = shutdown(fd, Int32(SHUT_RDWR))
            #else
            _ = shutdown(fd, SHUT_RDWR)
            #endif
            closeDescriptor(fd)
        }
        fd = -1
    }

    deinit { close() }
}

func closeDescriptor(_ fd: Int32) {
    #if canImport(Glibc)
    _ = Glibc.close(fd)
    #else
    _ = Darwin.close(fd)
    #endif
}
