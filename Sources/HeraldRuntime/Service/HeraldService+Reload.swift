// SIGHUP: the tokens file and the TLS certificate and key read again, without a restart.

extension HeraldService {
    /// What SIGHUP does, on the loop thread: re-reads the tokens file (`reloadTokens`), then the
    /// TLS certificate and key (`reloadCertificate`). Each keeps what it had when its files are
    /// invalid, and logs why.
    public func reloadOnHangup() {
        reloadTokens()
        reloadCertificate()
    }

    /// Asks the loop, from any thread, to reload as SIGHUP does.
    public func requestReload() { reloadRequest?.fire() }

    /// Re-reads `--tls-cert` and `--tls-key` (and `--tls-client-ca`, `--tls-client-crl`) into a new context for every
    /// later connection, so a renewed certificate is served without a restart. Connections
    /// already open keep the session they negotiated (each holds its own reference to the old
    /// context, freed with the last of them). Files that do not load, or a key that does not
    /// match, change nothing: the old context stays and the error is logged. Loop thread only.
    public func reloadCertificate() {
        guard let settings = configuration.tls else { return }
        do {
            credentials.certificateReloaded(try TLSContext(settings))
            log("SIGHUP: TLS certificate and key reloaded from \(settings.certificateFile) and \(settings.keyFile)"
                + (settings.clientCRLFile.map { ", client CRL from \($0)" } ?? "") + "; new connections use them, open ones keep theirs")
        } catch {
            credentials.certificateReloadFailed()
            log("error: SIGHUP: \(error) The previous certificate, key and client CRL stay in use; fix the files and send SIGHUP again.")
        }
    }
}
