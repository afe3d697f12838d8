// OpenSSL (libssl, libcrypto) for the client library's TLS, without libevent.
// The setters below are function-like macros Swift cannot import: wrapped as static inline functions.
#pragma once
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <string.h>

/// `SSL_set_tlsext_host_name` (SNI) is a macro over `SSL_ctrl`.
static inline int herald_client_set_server_name(SSL *ssl, const char *name) {
    return (int)SSL_set_tlsext_host_name(ssl, name);
}
/// Partial writes and a moving write buffer: what a non-blocking writer that retries from its own buffer needs.
static inline void herald_client_set_nonblocking_modes(SSL_CTX *ctx) {
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
#ifdef SSL_OP_IGNORE_UNEXPECTED_EOF
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
#endif
}
/// `SSL_CTX_set_max_proto_version` is a macro over `SSL_CTX_ctrl`.
static inline int herald_client_set_max_proto(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_max_proto_version(ctx, version);
}
/// The negotiated protocol, e.g. "TLSv1.3".
static inline const char *herald_client_tls_version(const SSL *ssl) { return SSL_get_version(ssl); }
/// Every queued OpenSSL error of this thread as text, joined by "; " (the queue is emptied).
static inline void herald_client_drain_errors(char *buf, size_t cap) {
    if (cap == 0) return;
    buf[0] = 0;
    size_t used = 0;
    unsigned long code;
    while ((code = ERR_get_error()) != 0) {
        if (used > 0 && used + 2 < cap) { buf[used++] = ';'; buf[used++] = ' '; buf[used] = 0; }
        if (used + 1 >= cap) continue;
        ERR_error_string_n(code, buf + used, cap - used);
        used += strlen(buf + used);
    }
    if (used == 0) snprintf(buf, cap, "no detail from OpenSSL");
}
