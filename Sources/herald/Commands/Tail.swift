// `herald tail`: a consumer that prints deliveries as they come, acknowledging each.
import ArgumentParser
import HeraldCommandLine
import Foundation
import HeraldCore
import HeraldWireTesting

struct Tail: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Subscribe as a durable consumer and print deliveries (one JSON line each).")

    @OptionGroup var server: ServerConnectionOptions
    @Option(help: "Durable consumer name (default tail). With --no-ack: start at this consumer's acknowledged cursor without moving it.") var consumer: String?
    @Option(help: "committed (default: resume, or the tail for a new consumer), earliest, or a cursor.") var from: String?
    @Option(help: "Exit after this many deliveries.") var limit: Int?
    @Option(help: "Exit after this many seconds without a delivery.") var idleExit: Int?
    @Flag(help: "Read without acknowledging: an ephemeral stream that moves no cursor and takes no consumer's place.") var noAck = false
    @Option(name: .customLong("app"), help: "Print only this app's deliveries (repeatable; a subscribe filter).") var apps: [String] = []
    @Option(name: .customLong("kind"), help: "Print only deliveries of this kind (repeatable: alert, quiet, queued, …).") var kinds: [String] = []
    @OptionGroup var logging: LogOptions

    func run() throws {
        logging.configure()
        do {
            let client = try server.connectAndHello()
            let consumer = self.consumer ?? "tail"
            var sub: [String: JSONValue] = ["op": "subscribe"]
            if noAck {
                sub["ephemeral"] = true
                if let name = self.consumer { sub["consumer"] = .string(name) }
            } else {
                sub["consumer"] = .string(consumer)
            }
            if let from { sub["from"] = Int64(from).map { .int($0) } ?? .string(from) }
            var filter: [String: JSONValue] = [:]
            if !apps.isEmpty { filter["apps"] = .array(apps.map { .string($0) }) }
            if !kinds.isEmpty { filter["kinds"] = .array(kinds.map { .string($0) }) }
            if !filter.isEmpty { sub["filter"] = .object(filter) }
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
                    if noAck { continue }
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
