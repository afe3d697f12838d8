// The client side of TLS for WireClient: OpenSSL on a connected blocking socket.
import CLibEventSSL
import Glibc

/// How a test (or `herald tail`) speaks TLS to Herald.
public struct TLSClientOptions: Sendable {
    /// PEM CA that signed the server's certificate; nil skips verification (tests of refusal only).
    public var caFile: String?
    /// A client certificate and its key, for certificate-mapped grants.
    public var certificateFile: String?
    public var keyFile: String?
    /// The highest protocol to offer, e.g. `TLS1_1_VERSION` to check that the server refuses it.
    public var maxVersion: Int32?
    /// OpenSSL cipher string; "DEFAULT:@SECLEVEL=0" lets this client offer TLS 1.1 at all.
    public var ciphers: String?

    public init(caFile: String? = nil, certificateFile: String? = nil, keyFile: String? = nil,
                maxVersion: Int32? = nil, ciphers: String? = nil) {
        self.caFile = caFile; self.certificateFile = certificateFile; self.keyFile = keyFile
        self.maxVersion = maxVersion; self.ciphers = ciphers
    }

    /// TLS 1.1 at most, with the security level lowered so OpenSSL 3 will offer it.
    public static func tls11Only(caFile: String? = nil) -> TLSClientOptions {
        TLSClientOptions(caFile: caFile, maxVersion: TLS1_1_VERSION, ciphers: "DEFAULT:@SECLEVEL=0")
    }
}

/// One TLS session over a connected socket. The socket stays blocking: `WireClient` polls it
/// (and `pending` for bytes OpenSSL already decrypted) before reading.
final class TLSClientSession {
    /// Owned: freed in deinit (the SSL first; it holds its own reference to the context).
    private let context: OpaquePointer
    private let ssl: OpaquePointer

    /// Performs the handshake; throws with OpenSSL's reason when it fails. With a CA file the
    /// server's certificate must also name `host` (an IP address SAN, or a DNS name).
    init(fd: Int32, host: String, options: TLSClientOptions) throws(WireClient.Failure) {
        let ctx = try Self.makeContext(options)
        guard let ssl = SSL_new(ctx) else { SSL_CTX_free(ctx); throw .connect("TLS: \(Self.errors())") }
        context = ctx
        self.ssl = ssl
        SSL_set_fd(ssl, fd)
        if options.caFile != nil {
            var probe = in6_addr()
            let isAddress = inet_pton(AF_INET, host, &probe) == 1 || inet_pton(AF_INET6, host, &probe) == 1
            if isAddress {
                _ = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host)
            } else {
                _ = SSL_set1_host(ssl, host)
                _ = herald_ssl_set_server_name(ssl, host)
            }
        }
        ERR_clear_error()
        if SSL_connect(ssl) != 1 {
            let verify = SSL_get_verify_result(ssl)
            let detail = verify == X509_V_OK ? Self.errors() : String(cString: X509_verify_cert_error_string(Int(verify)))
            throw .connect("TLS handshake failed: \(detail)")
        }
    }

    /// The negotiated protocol, e.g. "TLSv1.3".
    var protocolVersion: String { String(cString: herald_ssl_version(ssl)) }

    /// Bytes already decrypted and waiting in OpenSSL (a poll on the socket would not see them).
    var pending: Int { Int(SSL_pending(ssl)) }

    /// Reads up to `chunk.count` bytes into `chunk`; 0 means the server closed the connection.
    func read(into chunk: inout [UInt8]) throws(WireClient.Failure) -> Int {
        ERR_clear_error()
        let n = SSL_read(ssl, &chunk, Int32(chunk.count))
        if n > 0 { return Int(n) }
        switch SSL_get_error(ssl, n) {
        case SSL_ERROR_ZERO_RETURN: return 0
        case SSL_ERROR_SYSCALL: return 0  // EOF without close_notify: the peer is gone all the same
        case let code: throw .io("TLS read failed (SSL error \(code)): \(Self.errors())")
        }
    }

    /// Writes all of `bytes` (blocking socket: SSL_write returns only when done or failed).
    func write(_ bytes: [UInt8]) throws(WireClient.Failure) {
        ERR_clear_error()
        guard !bytes.isEmpty else { return }
        let n = SSL_write(ssl, bytes, Int32(bytes.count))
        if n <= 0 {
            let code = SSL_get_error(ssl, n)
            let detail = code == SSL_ERROR_SYSCALL ? String(cString: strerror(errno)) : Self.errors()
            throw .io("TLS write failed (SSL error \(code)): \(detail)")
        }
    }

    /// Sends close_notify (best effort).
    func shutdown() { _ = SSL_shutdown(ssl) }

    private static func makeContext(_ options: TLSClientOptions) throws(WireClient.Failure) -> OpaquePointer {
        guard let ctx = SSL_CTX_new(TLS_client_method()) else { throw .connect("TLS: \(errors())") }
        func fail(_ what: String) -> WireClient.Failure {
            let message = "TLS: \(what): \(errors())"
            SSL_CTX_free(ctx)
            return .connect(message)
        }
        if let ciphers = options.ciphers, SSL_CTX_set_cipher_list(ctx, ciphers) != 1 { throw fail("cipher list \(ciphers)") }
        if let max = options.maxVersion {
            _ = herald_ssl_ctx_set_min_proto(ctx, 0)
            _ = herald_ssl_ctx_set_max_proto(ctx, max)
        }
        if let ca = options.caFile {
            guard SSL_CTX_load_verify_locations(ctx, ca, nil) == 1 else { throw fail("CA file \(ca)") }
            SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nil)
        }
        if let cert = options.certificateFile, let key = options.keyFile {
            guard SSL_CTX_use_certificate_chain_file(ctx, cert) == 1, SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) == 1 else {
                throw fail("client certificate \(cert)")
            }
        }
        return ctx
    }

    deinit {
        SSL_free(ssl)
        SSL_CTX_free(context)
    }

    static func errors() -> String {
        var buffer = [CChar](repeating: 0, count: 1024)
        herald_ssl_drain_errors(&buffer, buffer.count)
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
