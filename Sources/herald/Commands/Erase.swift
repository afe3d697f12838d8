// `herald erase USER`: erase a user's notification content through a running herald serve (SPEC §14).
import ArgumentParser
import Foundation
import HeraldCommandLine
import HeraldCore
import HeraldWireTesting

struct Erase: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Erase a user's notification content: their content keys are deleted and the erasure is stored as an event.",
        discussion: """
            Sends {"op":"erase","user":USER} (the admin role) to a running herald serve. Every title, subtitle, body, \
            placeholder, data, sender name and action title of the user stored so far becomes unreadable — in the \
            database, and in exports and backups taken afterwards; decisions stay. The user's later notifications are \
            stored normally, under a new key. Backups taken before the erasure still hold the key: see \
            docs/erasure.md.
            """)

    @Argument(help: "The user whose content to erase.") var user: String
    @Option(help: "HOST:PORT of a running herald serve.") var connect = "127.0.0.1:7411"
    @Option(help: "Token with the admin role (omit in dev mode). Prefer --token-file or $HERALD_TOKEN.") var token: String?
    @Option(help: "A file holding the token (its first line).") var tokenFile: String?
    @Option(name: .customLong("tls-ca"), help: "Connect with TLS, verifying the server against this PEM CA file.") var tlsCA: String?
    @Option(name: .customLong("tls-cert"), help: "With --tls-ca: a client certificate (PEM) to present.") var tlsCert: String?
    @Option(name: .customLong("tls-key"), help: "With --tls-cert: its private key (PEM).") var tlsKey: String?

    func run() throws {
        guard let (host, port) = hostAndPort(connect) else { throw ValidationError("--connect must be HOST:PORT") }
        if token != nil && tokenFile != nil { throw ValidationError("Give --token or --token-file, not both.") }
        var secret = token ?? ProcessInfo.processInfo.environment["HERALD_TOKEN"]
        if let tokenFile {
            guard let text = try? String(contentsOfFile: tokenFile, encoding: .utf8) else {
                throw ValidationError("Cannot read --token-file \(tokenFile): check the path and that this user may read it.")
            }
            secret = text.split(separator: "\n", omittingEmptySubsequences: false).first.map { $0.trimmingCharacters(in: .whitespaces) }
        }
        do {
            let tls = tlsCA.map { TLSClientOptions(caFile: $0, certificateFile: tlsCert, keyFile: tlsKey) }
            let client = try WireClient(host: host, port: port, tls: tls)
            defer { client.close() }
            let hello = try client.request(#"{"op":"hello","token":\#(JSONValue.string(secret ?? "").canonicalString)}"#)
            guard hello["ok"]?.boolValue == true else {
                Log.info("hello refused: \(hello.canonicalString)")
                throw ExitCode.error
            }
            let reply = try client.request(JSONValue.object(["op": "erase", "user": .string(user)]).canonicalString)
            guard reply["ok"]?.boolValue == true else {
                Log.info("erase refused: \(reply.canonicalString)")
                throw ExitCode.error
            }
            print("erased the content of \(user) (event seq \(reply["seq"]?.intValue.map(String.init) ?? "?"))")
        } catch let failure as WireClient.Failure {
            Log.info("error: \(host):\(port): \(failure)")
            throw ExitCode.error
        }
    }
}
