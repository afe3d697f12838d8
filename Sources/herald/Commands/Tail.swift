// `herald tail`: a consumer (HeraldClient's) that prints deliveries as they come, acknowledging each.
import ArgumentParser
import Foundation
import HeraldClient
import HeraldCommandLine

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
        guard let (host, port) = hostAndPort(server.connect) else { throw ValidationError("--connect must be HOST:PORT") }
        let token = try server.resolvedToken()
        let start: SubscribeStart
        switch from {
        case nil, "committed"?: start = .committed
        case "earliest"?: start = .earliest
        case let text?:
            guard let cursor = Int64(text) else {
                Log.info("error: --from must be committed, earliest or a cursor, not “\(text)”")
                throw ExitCode.error
            }
            start = .after(cursor)
        }
        let filter = apps.isEmpty && kinds.isEmpty ? nil
            : DeliveryFilter(apps: apps.isEmpty ? nil : apps, kinds: kinds.isEmpty ? nil : kinds.map { DeliveryKind(rawValue: $0) })
        let tls = server.tls
        let (noAck, consumer, limit, idleExit) = (noAck, consumer, limit, idleExit)
        let failure = runBlocking { () async -> HeraldError? in
            do throws(HeraldError) {
                let stream = noAck
                    ? try await HeraldConsumer.stream(host: host, port: port, token: token, tls: tls, consumer: consumer, from: start, filter: filter)
                    // Each delivery is acked once the next is asked for (and the last on close): at most one line is printed again after a crash.
                    : try await HeraldConsumer.subscribe(host: host, port: port, token: token, tls: tls, consumer: consumer ?? "tail", from: start,
                                                         filter: filter, ackEvery: 1)
                return await Self.print(stream, limit: limit, idleExit: idleExit, acked: !noAck)
            } catch {
                Log.info(error.kind == .authentication ? "hello refused: \(error)" : "error: \(error)")
                return error
            }
        }
        if failure != nil { throw ExitCode.error }
    }

    /// Prints deliveries up to `--limit`, or until `--idle-exit` seconds pass without one; then
    /// closes, which acks what was printed and waits (up to 10 s) for those acks' replies, so that
    /// the next run goes on after them. Lines received but not printed are not acked.
    private static func print(_ stream: HeraldConsumer, limit: Int?, idleExit: Int?, acked: Bool) async -> HeraldError? {
        var printed = 0
        var last: [Int: Int64] = [:]
        var failure: HeraldError?
        while limit.map({ printed < $0 }) ?? true {
            do throws(HeraldError) {
                guard let delivery = try await stream.next(timeoutMilliseconds: idleExit.map { $0 * 1000 }) else { break }
                Swift.print(delivery.line)
                fflush(nil)
                printed += 1
                last[delivery.partition] = delivery.cursor
            } catch {
                if error.code != "timeout" {
                    Log.info("error: \(error)")
                    failure = error
                }
                break
            }
        }
        await stream.close()
        if acked {
            let acknowledged = stream.acknowledged
            let unconfirmed = last.filter { partition, cursor in (acknowledged[partition] ?? -1) < cursor }
            if !unconfirmed.isEmpty {
                Log.info("warning: the acks of the last lines printed were not confirmed within 10 s; the next run may print them again")
            }
        }
        return failure
    }
}
