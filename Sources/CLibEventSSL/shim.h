// libevent's OpenSSL bufferevents and the parts of OpenSSL (libssl, libcrypto) Herald uses for TLS.
// As in CLibEvent, the system headers come before any event2/ header (libevent #460).
// OpenSSL's setters below are function-like macros or stack macros Swift cannot import:
// they are wrapped as static inline functions.
#pragma once
#include <sys/types.h>
#include <sys/time.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <string.h>
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <event2/event.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>

/// `SSL_CTX_set_min_proto_version` is a macro over `SSL_CTX_ctrl`.
static inline int herald_ssl_ctx_set_min_proto(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_min_proto_version(ctx, version);
}
/// `SSL_CTX_set_max_proto_version` is a macro over `SSL_CTX_ctrl`.
static inline int herald_ssl_ctx_set_max_proto(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_max_proto_version(ctx, version);
}
/// The server options Herald wants; `SSL_OP_*` are `SSL_OP_BIT(n)` macros Swift cannot import.
/// SSL_OP_IGNORE_UNEXPECTED_EOF: OpenSSL 3 reports a peer closing without close_notify as an
/// SSL error, which libevent 2.1 passes on as BEV_EVENT_ERROR even with dirty shutdowns allowed;
/// with it, such a close is a plain EOF.
static inline void herald_ssl_ctx_set_server_options(SSL_CTX *ctx) {
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE);
#ifdef SSL_OP_IGNORE_UNEXPECTED_EOF
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
#endif
}
/// `SSL_set_tlsext_host_name` (SNI) is a macro over `SSL_ctrl`.
static inline int herald_ssl_set_server_name(SSL *ssl, const char *name) {
    return (int)SSL_set_tlsext_host_name(ssl, name);
}
/// The negotiated protocol, e.g. "TLSv1.3".
static inline const char *herald_ssl_version(const SSL *ssl) { return SSL_get_version(ssl); }

/// Appends one name and a '\n' to buf when it fits and holds no NUL or newline; returns 1 if appended.
static inline int herald_append_name(char *buf, size_t cap, size_t *used, const unsigned char *s, int len) {
    if (s == NULL || len <= 0) return 0;
    for (int i = 0; i < len; i++) if (s[i] == 0 || s[i] == '\n') return 0;
    if (*used + (size_t)len + 2 > cap) return 0;
    memcpy(buf + *used, s, (size_t)len);
    *used += (size_t)len;
    buf[(*used)++] = '\n';
    buf[*used] = 0;
    return 1;
}

/// The names of the peer's verified certificate, each followed by '\n': the subject CN, then
/// every DNS and URI subject alternative name. Returns how many names were written, 0 when the
/// peer sent no certificate, -1 when its certificate did not verify.
static inline int herald_ssl_peer_names(SSL *ssl, char *buf, size_t cap) {
    size_t used = 0;
    int count = 0;
    if (cap > 0) buf[0] = 0;
    X509 *cert = SSL_get0_peer_certificate(ssl);
    if (cert == NULL) return 0;
    if (SSL_get_verify_result(ssl) != X509_V_OK) return -1;
    X509_NAME *subject = X509_get_subject_name(cert);
    int index = subject ? X509_NAME_get_index_by_NID(subject, NID_commonName, -1) : -1;
    if (index >= 0) {
        ASN1_STRING *cn = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, index));
        count += herald_append_name(buf, cap, &used, ASN1_STRING_get0_data(cn), ASN1_STRING_length(cn));
    }
    GENERAL_NAMES *names = X509_get_ext_d2i(cert, NID_subject_alt_name, NULL, NULL);
    if (names != NULL) {
        for (int i = 0; i < sk_GENERAL_NAME_num(names); i++) {
            const GENERAL_NAME *name = sk_GENERAL_NAME_value(names, i);
            if (name->type == GEN_DNS || name->type == GEN_URI) {
                ASN1_IA5STRING *s = name->type == GEN_DNS ? name->d.dNSName : name->d.uniformResourceIdentifier;
                count += herald_append_name(buf, cap, &used, ASN1_STRING_get0_data(s), ASN1_STRING_length(s));
            }
        }
        GENERAL_NAMES_free(names);
    }
    return count;
}

/// Loads the PEM CRLs of `path` into the context's verification store and turns on revocation
/// checking of peer certificates (X509_V_FLAG_CRL_CHECK: the leaf, against its issuer's CRL; a
/// certificate whose issuer has no CRL in the store then fails, as does one past its CRL's next
/// update). Returns how many CRLs were loaded, 0 when the file held none or did not parse.
static inline int herald_ssl_ctx_load_crls(SSL_CTX *ctx, const char *path) {
    X509_STORE *store = SSL_CTX_get_cert_store(ctx);
    X509_LOOKUP *lookup = store ? X509_STORE_add_lookup(store, X509_LOOKUP_file()) : NULL;
    if (lookup == NULL) return 0;
    int loaded = X509_load_crl_file(lookup, path, X509_FILETYPE_PEM);
    if (loaded <= 0) return 0;
    X509_STORE_set_flags(store, X509_V_FLAG_CRL_CHECK);
    return loaded;
}

/// Every queued OpenSSL error of this thread as text, joined by "; " (the queue is emptied);
/// "no detail from OpenSSL" when there is none. Truncated to fit `cap` bytes.
static inline void herald_ssl_drain_errors(char *buf, size_t cap) {
    if (cap == 0) return;
    buf[0] = 0;
    size_t used = 0;
    unsigned long code;
    while ((code = ERR_get_error()) != 0) {
        if (used > 0 && used + 2 < cap) { buf[used++] = ';'; buf[used++] = ' '; buf[used] = 0; }
        if (used + 1 >= cap) continue;  /* full: keep draining so the queue is empty */
        ERR_error_string_n(code, buf + used, cap - used);
        used += strlen(buf + used);
    }
    if (used == 0) snprintf(buf, cap, "no detail from OpenSSL");
}
