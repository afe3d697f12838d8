// `herald tail`: a consumer that prints deliveries as they come, acknowledging each.
import ArgumentParser
import HeraldCommandLine
import Foundation
import HeraldCore
import HeraldClient

struct Tail: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Subscribe as a durable consumer and print deliveries (one JSON line each).")

    @Option(help: "HOST:PORT of a running herald serve.") var connect = "127.0.0.1:7411"
    @Option(help: "Durable consumer name.") var consumer = "tail"
    @Option(help: "committed (default: resume, or the tail for a new consumer), earliest, or a cursor.") var from: String?
    @Option(help: "Token with the consumer role (omit in dev mode). Other local users can read it in ps: prefer --token-file or $HERALD_TOKEN.") var token: String?
    @Option(help: "A file holding the token (its first line).") var tokenFile: String?
    @Option(help: "Exit after this many deliveries.") var limit: Int?
    @Option(help: "Exit after this many seconds without a delivery.") var idleExit: Int?
    @Option(name: .customLong("tls-ca"), help: "Connect with TLS, verifying the server against this PEM CA file.") var tlsCA: String?
    @Option(name: .customLong("tls-cert"), help: "With --tls-ca: a client certificate (PEM) to present.") var tlsCert: String?
    @Option(name: .customLong("tls-key"), help: "With --tls-cert: its private key (PEM).") var tlsKey: String?
    @OptionGroup var logging: LogOptions

    /// --token, else the first line of --token-file, else $HERALD_TOKEN (nil: dev mode).
    func resolvedToken() throws -> String? {
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

    func run() throws {
        logging.configure()
        guard let (host, port) = hostAndPort(connect) else { throw ValidationError("--connect must be HOST:PORT") }
        let token = try resolvedToken()
        do {
            let tls = tlsCA.map { TLSClientOptions(caFile: $0, certificateFile: tlsCert, keyFile: tlsKey) }
            let client = try WireClient(host: host, port: port, tls: tls)
            let hello = try client.request(#"{"op":"hello","token":\#(JSONValue.string(token ?? "").canonicalString)}"#)
            guard hello["ok"]?.boolValue == true else {
                Log.info("hello refused: \(hello.canonicalString)")
                throw ExitCode.error
            }
            var sub: [String: JSONValue] = ["op": "subscribe", "consumer": .string(consumer)]
            if let from { sub["from"] = Int64(from).map { .int($0) } ?? .string(from) }
            try client.send(JSONValue.object(sub).canonicalString)
            var printed = 0, acksSent = 0, acksConfirmed = 0
            /// An ack's reply is `{"ok":true,"cursor":n}` (no `op`); a failure ends the run.
            func replyCounted(_ value: JSONValue) throws -> Bool {
                if value["ok"]?.boolValue == false {
                    Log.info("error: \(value.canonicalString)")
                    throw ExitCode.error
                }
                guard value["ok"]?.boolValue == true, value["op"] == nil else { return false }
                acksConfirmed += 1
                return true
            }
            while limit.map({ printed < $0 }) ?? true {
                guard let line = try client.readLine(timeoutMilliseconds: idleExit.map { Int32($0 * 1000) } ?? -1) else { break }
                let value = try JSONValue.parse(line)
                if value["op"]?.stringValue == "delivery", let cursor = value["cursor"]?.intValue {
                    print(String(decoding: line, as: UTF8.self))
                    fflush(nil)
                    printed += 1
                    try client.send(#"{"op":"ack","consumer":\#(JSONValue.string(consumer).canonicalString),"cursor":\#(cursor)}"#)
                    acksSent += 1
                } else {
                    _ = try replyCounted(value)
                }
            }
            // Before leaving, the replies to the acks sent: closing at once dropped the acks the
            // server had not read yet, so the next run printed the same lines again (and repeated
            // `--limit` runs over a backlog made no progress). Delivery lines read meanwhile are not
            // printed nor acknowledged: the next run gets them.
            let deadline = Date().addingTimeInterval(10)
            while acksConfirmed < acksSent {
                let left = Int32(max(0, deadline.timeIntervalSinceNow) * 1000)
                guard left > 0, let line = try client.readLine(timeoutMilliseconds: left) else {
                    Log.info("warning: \(acksSent - acksConfirmed) of \(acksSent) acks unconfirmed after 10 s; the next run may print their deliveries again")
                    break
                }
                _ = try replyCounted(JSONValue.parse(line))
            }
            client.close()
        } catch let error as WireClient.Failure {
            Log.info("error: \(error)")
            throw ExitCode.error
        }
    }
}
