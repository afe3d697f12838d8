// Connecting to a running `herald serve` as a client: token resolution, TLS options and the hello.
import ArgumentParser
import Foundation
import HeraldWireTesting
import HeraldCommandLine
import HeraldCore

/// The flags a command that talks to a running server takes (`tail`, `consumers`).
struct ServerConnectionOptions: ParsableArguments {
    @Option(help: "HOST:PORT of a running herald serve.") var connect = "127.0.0.1:7411"
    @Option(help: "Token (omit in dev mode). Other local users can read it in ps: prefer --token-file or $HERALD_TOKEN.") var token: String?
    @Option(help: "A file holding the token (its first line).") var tokenFile: String?
    @Option(name: .customLong("tls-ca"), help: "Connect with TLS, verifying the server against this PEM CA file.") var tlsCA: String?
    @Option(name: .customLong("tls-cert"), help: "With --tls-ca: a client certificate (PEM) to present.") var tlsCert: String?
    @Option(name: .customLong("tls-key"), help: "With --tls-cert: its private key (PEM).") var tlsKey: String?

    /// --token, else the first line of --token-file, else $HERALD_TOKEN (nil: dev mode).
    func resolvedToken() throws -> String? {
        try resolveToken(token: token, tokenFile: tokenFile)
    }

    /// Connects and says hello; a refused hello ends the command.
    func connectAndHello() throws -> WireClient {
        guard let (host, port) = hostAndPort(connect) else { throw ValidationError("--connect must be HOST:PORT") }
        let token = try resolvedToken()
        let tls = tlsCA.map { TLSClientOptions(caFile: $0, certificateFile: tlsCert, keyFile: tlsKey) }
        let client = try WireClient(host: host, port: port, tls: tls)
        let hello = try client.request(#"{"op":"hello","token":\#(JSONValue.string(token ?? "").canonicalString)}"#)
        guard hello["ok"]?.boolValue == true else {
            Log.info("hello refused: \(hello.canonicalString)")
            throw ExitCode.error
        }
        return client
    }
}

/// `token`, else the first line of `tokenFile`, else $HERALD_TOKEN (nil: dev mode).
func resolveToken(token: String?, tokenFile: String?) throws -> String? {
    if token != nil && tokenFile != nil { throw ValidationError("Give --token or --token-file, not both.") }
    if let token { return token }
    if let tokenFile {
        guard let text = try? String(contentsOfFile: tokenFile, encoding: .utf8) else {
            throw ValidationError("Cannot read --token-file \(tokenFile): check the path and that this user may read it.")
        }
        return text.split(separator: "\n", omittingEmptySubsequences: false).first.map { String($0).trimmingCharacters(in: .whitespaces) } ?? ""
    }
    return ProcessInfo.processInfo.environment["HERALD_TOKEN"]
}
