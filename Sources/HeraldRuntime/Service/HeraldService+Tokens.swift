// The tokens file: loaded at start-up, reloaded on SIGHUP without a restart (HeraldService+Reload).
import HeraldCore

extension HeraldService {
    /// Start-up: reads `--tokens` if given and says how access is configured.
    func loadTokensAtStart() throws {
        if let path = configuration.tokensFile {
            let tokens = try TokenFile.load(path)
            credentials.tokensLoaded(tokens)
            log("tokens: \(tokens.count) credential(s) loaded from \(path)")
            if let warning = TokenFile.plainTokenWarning(tokens, path: path) { log(warning) }
            if let warning = TokenFile.sharedConsumerNamesWarning(tokens, path: path) { log(warning) }
        }
        let tokens = credentials.tokens
        if tokens.isDevMode {
            log("dev mode: no tokens configured, every hello is granted every role (pass --tokens FILE in production)")
        }
        // Either would otherwise start on every interface without a word.
        let loopback = ServiceConfiguration.isLoopback(configuration.host)
        if !loopback && tokens.isDevMode {
            log("warning: dev mode on \(configuration.host):\(configuration.port): anyone who can reach this address gets every role, operator's included; listen on 127.0.0.1, or pass --tokens FILE")
        } else if !loopback && configuration.tls == nil {
            log("warning: tokens travel in clear on \(configuration.host):\(configuration.port) (no TLS): anyone on the network path can read them and act with them; pass --tls-cert and --tls-key (docs/security.md)")
        }
    }

    /// SIGHUP: re-reads the tokens file on the loop thread. A valid file replaces the table for
    /// every later hello, and each connection's grant is re-checked: unchanged grants carry on,
    /// changed or removed ones get `grant_revoked` and are closed. An invalid file changes
    /// nothing: the old table stays and the error is logged. Loop thread only.
    public func reloadTokens() {
        guard let path = configuration.tokensFile else {
            log("SIGHUP: no --tokens file to reload (dev mode stays on); nothing changed")
            return
        }
        let table: TokenTable
        do {
            table = try TokenFile.load(path)
        } catch {
            credentials.tokenReloadFailed()
            log("error: SIGHUP: \(error) The previous \(credentials.tokens.count) credential(s) stay in force; fix the file and send SIGHUP again.")
            return
        }
        credentials.tokensReloaded(table)
        let revoked = connections.tokensReloaded(table)
        log("SIGHUP: tokens reloaded from \(path): \(table.count) credential(s); \(revoked) connection(s) lost their grant and were closed")
        if let warning = TokenFile.plainTokenWarning(table, path: path) { log(warning) }
        if let warning = TokenFile.sharedConsumerNamesWarning(table, path: path) { log(warning) }
    }
}
