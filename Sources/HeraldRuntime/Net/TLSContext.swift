// TLS for client connections: one OpenSSL context, and libevent's OpenSSL bufferevents on it.
import CLibEvent
import CLibEventSSL
import Glibc
import HeraldCore

/// Where `herald serve` finds its certificate, key and (optionally) the CA that signs client certificates.
public struct TLSSettings: Sendable, Equatable {
    /// PEM: the server certificate, followed by any intermediates (`--tls-cert`).
    public var certificateFile: String
    /// PEM: the certificate's private key (`--tls-key`).
    public var keyFile: String
    /// PEM: CA certificates that sign client certificates (`--tls-client-ca`). With it, clients
    /// may present a certificate; one that verifies and whose name is in the tokens file is
    /// granted that entry at hello. Clients without a certificate still use tokens.
    public var clientCAFile: String?
    /// PEM: certificate revocation lists of the client CA (`--tls-client-crl`, needs `clientCAFile`).
    /// With it, a client certificate the list revokes fails the handshake, and so does every
    /// client certificate once the list is past its next update: renew it and send SIGHUP.
    public var clientCRLFile: String?
    /// FAULT INJECTION FOR TESTS ONLY (false in production): every TLS bufferevent fails to be made,
    /// as when memory runs out, so a test can check connections are refused, not served in plaintext.
    public var failBuffereventsForTesting = false

    public init(certificateFile: String, keyFile: String, clientCAFile: String? = nil, clientCRLFile: String? = nil) {
        self.certificateFile = certificateFile
        self.keyFile = keyFile
        self.clientCAFile = clientCAFile
        self.clientCRLFile = clientCRLFile
    }
}

/// An OpenSSL server context: TLS 1.2 or newer, forward-secret AEAD ciphers for TLS 1.2 (TLS 1.3
/// uses OpenSSL's defaults, all AEAD), no renegotiation, no compression.
public final class TLSContext {
    /// Owned: created in init, freed in deinit; every connection's SSL holds its own reference.
    let context: OpaquePointer

    /// TLS 1.2 suites: ECDHE key exchange, AES-GCM or ChaCha20-Poly1305 (Mozilla's "intermediate" without DHE).
    public static let tls12Ciphers = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
        + "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
        + "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"

    public let settings: TLSSettings

    public init(_ settings: TLSSettings) throws(ServiceError) {
        self.settings = settings
        try Self.requireReadable(settings.certificateFile, flag: "--tls-cert", what: "certificate")
        try Self.requireReadable(settings.keyFile, flag: "--tls-key", what: "private key")
        if let ca = settings.clientCAFile { try Self.requireReadable(ca, flag: "--tls-client-ca", what: "client CA") }
        if let crl = settings.clientCRLFile {
            guard settings.clientCAFile != nil else {
                throw .configuration("A client CRL (--tls-client-crl \(crl)) revokes client certificates, but none are accepted "
                    + "without --tls-client-ca. Pass the CA that issues them too, or leave the CRL out.")
            }
            try Self.requireReadable(crl, flag: "--tls-client-crl", what: "client CRL")
        }
        guard let ctx = SSL_CTX_new(TLS_server_method()) else {
            throw .configuration("OpenSSL could not create a TLS context: \(Self.drainErrors()).")
        }
        context = ctx
        _ = herald_ssl_ctx_set_min_proto(ctx, TLS1_2_VERSION)
        herald_ssl_ctx_set_server_options(ctx)
        guard SSL_CTX_set_cipher_list(ctx, Self.tls12Ciphers) == 1 else {
            throw .configuration("OpenSSL refused Herald's TLS 1.2 cipher list: \(Self.drainErrors()).")
        }
        guard SSL_CTX_use_certificate_chain_file(ctx, settings.certificateFile) == 1 else {
            throw .configuration("The certificate \(settings.certificateFile) (--tls-cert) could not be loaded: \(Self.drainErrors()). "
                + "It must be PEM: the server certificate first, then any intermediates.")
        }
        guard SSL_CTX_use_PrivateKey_file(ctx, settings.keyFile, SSL_FILETYPE_PEM) == 1 else {
            throw .configuration("The private key \(settings.keyFile) (--tls-key) could not be loaded, or does not match the certificate "
                + "\(settings.certificateFile) (--tls-cert): \(Self.drainErrors()). It must be the unencrypted PEM key the certificate was issued for.")
        }
        guard SSL_CTX_check_private_key(ctx) == 1 else {
            throw .configuration("The private key \(settings.keyFile) (--tls-key) does not match the certificate "
                + "\(settings.certificateFile) (--tls-cert): \(Self.drainErrors()). Pass the key the certificate was issued for.")
        }
        if let ca = settings.clientCAFile {
            guard SSL_CTX_load_verify_locations(ctx, ca, nil) == 1, let names = SSL_load_client_CA_file(ca) else {
                throw .configuration("The client CA file \(ca) (--tls-client-ca) could not be loaded: \(Self.drainErrors()). "
                    + "It must hold PEM CA certificates.")
            }
            SSL_CTX_set_client_CA_list(ctx, names)
            if let crl = settings.clientCRLFile, herald_ssl_ctx_load_crls(ctx, crl) == 0 {
                throw .configuration("The client CRL file \(crl) (--tls-client-crl) could not be loaded: \(Self.drainErrors()). "
                    + "It must hold PEM certificate revocation lists (-----BEGIN X509 CRL-----) of the client CA.")
            }
            // Verify a certificate when one is sent; a client without one falls back to tokens.
            SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nil)
            // Needed once peers are verified, or OpenSSL fails session resumption.
            let sid = Array("herald".utf8)
            _ = SSL_CTX_set_session_id_context(ctx, sid, UInt32(sid.count))
        }
    }

    deinit { SSL_CTX_free(context) }

    /// A server-side OpenSSL bufferevent on an accepted socket; the handshake runs as data arrives.
    /// Freeing the bufferevent frees the SSL and closes the socket (BEV_OPT_CLOSE_ON_FREE). Nil if
    /// it cannot be made (only when memory runs out).
    func bufferevent(base: OpaquePointer, fd: Int32) -> OpaquePointer? {
        if settings.failBuffereventsForTesting { return nil }
        guard let ssl = SSL_new(context) else { return nil }
        // From here libevent owns the SSL, also when it fails: with BEV_OPT_CLOSE_ON_FREE its error
        // paths free it (libevent 2.1: by freeing the half-made bufferevent), so freeing it here
        // too would be a double free. (If libevent's own first allocation fails, it leaks one SSL.)
        guard let bev = bufferevent_openssl_socket_new(base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
                                                        Int32(BEV_OPT_CLOSE_ON_FREE.rawValue)) else { return nil }
        // A client that closes without close_notify has just closed: lines are framed by
        // newlines, so a truncated stream loses at most a partial line, never a request's meaning.
        bufferevent_openssl_set_allow_dirty_shutdown(bev, 1)
        return bev
    }

    /// The verified client certificate's names (CN, DNS and URI SANs), empty without one.
    static func peerNames(_ bev: OpaquePointer) -> [String] {
        guard let ssl = bufferevent_openssl_get_ssl(bev) else { return [] }
        var buffer = [CChar](repeating: 0, count: 4096)
        guard herald_ssl_peer_names(ssl, &buffer, buffer.count) > 0 else { return [] }
        return String(cBuffer: buffer).split(separator: "\n").map(String.init)
    }

    /// A graceful close of a TLS bufferevent (output drained): send close_notify so the client
    /// can tell the end from a cut connection. A no-op on a plaintext bufferevent. Not after a
    /// TLS error or EOF (OpenSSL forbids SSL_shutdown after a fatal error).
    static func sendCloseNotify(_ bev: OpaquePointer) {
        guard let ssl = bufferevent_openssl_get_ssl(bev) else { return }
        _ = SSL_shutdown(ssl)
        ERR_clear_error()
    }

    /// The negotiated protocol of a TLS bufferevent, e.g. "TLSv1.3".
    static func protocolVersion(_ bev: OpaquePointer) -> String? {
        guard let ssl = bufferevent_openssl_get_ssl(bev) else { return nil }
        return String(cString: herald_ssl_version(ssl))
    }

    /// Why a TLS bufferevent failed, for the close reason (e.g. "TLS failed: wrong version number"
    /// for a plaintext client, "unsupported protocol" for TLS 1.1); nil if OpenSSL said nothing.
    static func failure(_ bev: OpaquePointer) -> String? {
        var messages: [String] = []
        while true {
            let code = bufferevent_get_openssl_error(bev)
            if code == 0 { break }
            // libevent also queues SSL_get_error's small result codes (library 0): not OpenSSL errors.
            guard let reason = ERR_reason_error_string(code) else { continue }
            messages.append(String(cString: reason))
        }
        return messages.isEmpty ? nil : "TLS failed: " + messages.joined(separator: "; ")
    }

    private static func requireReadable(_ path: String, flag: String, what: String) throws(ServiceError) {
        if access(path, R_OK) != 0 {
            throw .configuration("The TLS \(what) file \(path) (\(flag)) cannot be read: \(String(cString: strerror(errno))). "
                + "Check the path and its permissions.")
        }
    }

    private static func drainErrors() -> String {
        var buffer = [CChar](repeating: 0, count: 1024)
        herald_ssl_drain_errors(&buffer, buffer.count)
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
