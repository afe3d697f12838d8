// `herald bridge nats`: publish every delivery to NATS JetStream; `herald bridge nats-read`: print what a stream holds.
import ArgumentParser
import Foundation
import HeraldBridge
import HeraldClient
import HeraldCommandLine
import HeraldCore

struct Bridge: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Hand deliveries to a downstream broker (NATS JetStream).",
        subcommands: [NatsCommand.self, NatsRead.self])

    struct NatsCommand: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "nats",
            abstract: "A durable Herald consumer that publishes each delivery to NATS JetStream and acks Herald's cursor only after JetStream stored it.",
            discussion: """
                Subject <prefix>.<app>.<kind>, the delivery line as the payload, header Nats-Msg-Id: <partition>:<cursor> \
                (JetStream drops a re-publish of the same delivery). The stream is created at start when absent (file \
                storage, subjects <prefix>.>, the duplicate window given) and checked when present. Runs until SIGTERM or \
                SIGINT; a failure of Herald or NATS starts it again from Herald's acknowledged cursor. docs/bridge.md.
                """)

        @Option(help: "HOST:PORT of the running herald serve.") var herald = "127.0.0.1:7411"
        @Option(help: "Token with the consumer role (omit in dev mode); prefer --token-file or $HERALD_TOKEN.") var token: String?
        @Option(help: "A file holding the token (its first line).") var tokenFile: String?
        @Option(name: .customLong("tls-ca"), help: "Connect to Herald with TLS, verifying it against this PEM CA file.") var tlsCA: String?
        @Option(name: .customLong("tls-cert"), help: "With --tls-ca: a client certificate (PEM) to present.") var tlsCert: String?
        @Option(name: .customLong("tls-key"), help: "With --tls-cert: its private key (PEM).") var tlsKey: String?
        @Option(help: "The durable Herald consumer name the bridge subscribes and acks as.") var consumer: String
        @Option(help: "The NATS server (nats://HOST:PORT).") var url = "nats://127.0.0.1:4222"
        @Option(help: "The JetStream stream's name.") var stream: String
        @Option(help: "The subjects' first token.") var subjectPrefix = "herald"
        @Option(help: "The most publishes awaiting JetStream's confirmation at once.") var window = 1_024
        @Option(help: "Seconds the stream drops a re-published message id (at least; a stream created here gets exactly this).") var duplicateWindow: Int64 = 120
        @Option(help: "Milliseconds a publish waits for JetStream's confirmation before the bridge starts again.") var ackWait: Int64 = 5_000

        func validate() throws {
            guard hostAndPort(herald) != nil else { throw ValidationError("--herald must be HOST:PORT, e.g. 127.0.0.1:7411") }
            guard window > 0, window <= 65_536 else { throw ValidationError("--window must be 1…65536") }
            guard duplicateWindow > 0 else { throw ValidationError("--duplicate-window must be seconds above 0") }
            guard ackWait > 0 else { throw ValidationError("--ack-wait must be milliseconds above 0") }
            guard !subjectPrefix.isEmpty, !subjectPrefix.contains(where: { " *>".contains($0) }) else {
                throw ValidationError("--subject-prefix must be a NATS subject without spaces or wildcards, e.g. herald")
            }
        }

        func run() throws {
            var options = NatsBridgeOptions()
            (options.heraldHost, options.heraldPort) = hostAndPort(herald)!
            options.token = try resolveToken(token: token, tokenFile: tokenFile)
            options.tls = tlsCA.map { TLSOptions(caFile: $0, certificateFile: tlsCert, keyFile: tlsKey) }
            options.consumer = consumer
            options.natsURL = url
            options.stream = stream
            options.subjectPrefix = subjectPrefix
            options.window = window
            options.duplicateWindowSeconds = duplicateWindow
            options.ackWaitMilliseconds = ackWait
            NatsBridge(options: options) { Log.info($0) }.run()
        }
    }

    struct NatsRead: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "nats-read",
            abstract: "Print the messages a JetStream stream holds, one JSON line each: sequence, subject, Nats-Msg-Id (and the payload with --payload).",
            discussion: "Reads the stream by sequence (no consumer is created), from --from-sequence to the newest message at start. To check what the bridge stored.")

        @Option(help: "The NATS server (nats://HOST:PORT).") var url = "nats://127.0.0.1:4222"
        @Option(help: "The JetStream stream's name.") var stream: String
        @Option(help: "The first sequence to print (default: the stream's first).") var fromSequence: UInt64?
        @Flag(help: "Include each message's payload (the delivery line).") var payload = false

        func run() throws {
            do {
                try read()
            } catch {
                Log.info("error: \(error)")
                throw ExitCode.error
            }
        }

        private func read() throws(NatsFailure) {
            let nats = try NatsJetStream(url: url, maxPending: 1, ackWaitMilliseconds: 5_000)
            let state = try nats.streamState(stream)
            guard state.lastSequence > 0 else { return }
            let first = max(fromSequence ?? state.firstSequence, state.firstSequence)
            guard first <= state.lastSequence else { return }
            var out = ""
            for seq in first...state.lastSequence {
                let m = try nats.message(stream, at: seq)
                var o: [String: JSONValue] = ["seq": .int(Int64(seq)), "subject": .string(m.subject), "id": m.id.map(JSONValue.string) ?? .null]
                if payload { o["payload"] = .string(String(decoding: m.payload, as: UTF8.self)) }
                out += JSONValue.object(o).canonicalString + "\n"
                if out.utf8.count > 1 << 16 { print(out, terminator: ""); out = "" }
            }
            print(out, terminator: "")
            nats.close()
        }
    }
}
