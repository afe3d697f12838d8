// `herald erase USER`: erase a user's notification content through a running herald serve (SPEC §14).
import ArgumentParser
import Foundation
import HeraldCommandLine
import HeraldClient

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
        let token = try resolveToken(token: token, tokenFile: tokenFile)
        let tls = tlsCA.map { TLSOptions(caFile: $0, certificateFile: tlsCert, keyFile: tlsKey) }
        let (user, connect) = (user, connect)
        let ack = try HeraldCommands.withProducer(connect: connect, token: token, tls: tls, failed: { error in
            switch error.kind {
            case .authentication: return "hello refused: \(error)"
            case .client: return "error: \(connect): \(error)"
            default: return "erase refused: \(error)"
            }
        }) { producer throws(HeraldError) in try await producer.erase(user: user) }
        print("erased the content of \(user) (event seq \(ack.raw["seq"]?.intValue.map { String($0) } ?? "?"))")
    }
}
