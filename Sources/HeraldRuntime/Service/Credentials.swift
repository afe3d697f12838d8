// The grants and the TLS context in force, as last (re)loaded, and how their reloads went.
import HeraldCore

/// What new connections are checked against: the tokens table and the TLS context as last
/// loaded (SIGHUP reloads both; a file that does not load keeps the old one in force), with the
/// reloads counted for `stats`.
struct Credentials {
    /// The grants in force: `ServiceConfiguration.tokens`, or the tokens file as last (re)loaded.
    private(set) var tokens: TokenTable
    /// The main listener's TLS context, when TLS is configured: each new connection's. A reload
    /// replaces it with one read again from the same files (open connections keep theirs).
    private(set) var tls: TLSContext?
    private(set) var tokenReloads = 0
    private(set) var tokenReloadFailures = 0
    private(set) var certificateReloads = 0
    private(set) var certificateReloadFailures = 0

    init(tokens: TokenTable) { self.tokens = tokens }

    /// Start-up: the tokens file read (before any hello).
    mutating func tokensLoaded(_ table: TokenTable) { tokens = table }

    /// Start-up: the certificate and key read.
    mutating func certificateLoaded(_ context: TLSContext) { tls = context }

    /// SIGHUP: the tokens file read again; the table replaces the old one for every later hello.
    mutating func tokensReloaded(_ table: TokenTable) {
        tokens = table
        tokenReloads += 1
    }

    /// SIGHUP: the tokens file did not load; the old table stays.
    mutating func tokenReloadFailed() { tokenReloadFailures += 1 }

    /// SIGHUP: the certificate and key read again, for every later connection.
    mutating func certificateReloaded(_ context: TLSContext) {
        tls = context
        certificateReloads += 1
    }

    /// SIGHUP: the certificate or key did not load; the old context stays.
    mutating func certificateReloadFailed() { certificateReloadFailures += 1 }
}
