// `herald tail`: a consumer that prints deliveries as they come, acknowledging them in batches (the Swift HeraldClient).
import ArgumentParser
import HeraldCommandLine
import Foundation
import HeraldCore
import HeraldClient
import Synchronization

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
        let start: SubscribeStart
        switch from {
        case nil, "committed"?: start = .committed
        case "earliest"?: start = .earliest
        case let text?:
            guard let cursor = Int64(text) else { throw ValidationError("--from must be committed, earliest or a cursor") }
            start = .after(cursor)
        }
        let tls = tlsCA.map { TLSOptions(caFile: $0, certificateFile: tlsCert, keyFile: tlsKey) }
        let (consumer, limit, idleExit) = (consumer, limit, idleExit)
        // The command is synchronous; the client is async: run it on the concurrency pool and wait.
        let failure = Mutex<HeraldError?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task {
            defer { done.signal() }
            do throws(HeraldError) {
                try await Self.tail(host: host, port: port, token: token, tls: tls, consumer: consumer, from: start,
                                    limit: limit, idleExitSeconds: idleExit)
            } catch {
                failure.withLock { $0 = error }
            }
        }
        done.wait()
        if let error = failure.withLock({ $0 }) {
            Log.info(error.kind == .authentication ? "hello refused: \(error)" : "error: \(error)")
            throw ExitCode.error
        }
    }

    /// Prints each delivery line as it came. Acks go in batches (every 64 lines or 100 ms) and on
    /// the way out, where the close waits for their replies: closing at once dropped the acks the
    /// server had not read yet, so the next run printed the same lines again.
    static func tail(host: String, port: Int, token: String?, tls: TLSOptions?, consumer: String, from start: SubscribeStart,
                     limit: Int?, idleExitSeconds: Int?) async throws(HeraldError) {
        // One attempt to reconnect at most: a tail is interactive, a dead server should end it.
        let deliveries = try await HeraldConsumer.subscribe(host: host, port: port, token: token, tls: tls, consumer: consumer,
                                                            from: start, ackEvery: 64, ackIntervalMilliseconds: 100,
                                                            backoff: Backoff(attempts: 3))
        var printed = 0
        do throws(HeraldError) {
            while limit.map({ printed < $0 }) ?? true {
                let next: HeraldClient.Delivery?
                do throws(HeraldError) {
                    next = try await deliveries.next(timeoutMilliseconds: idleExitSeconds.map { $0 * 1000 })
                } catch where error.code == "timeout" {
                    break
                }
                guard let delivery = next else { break }
                print(delivery.line)
                fflush(nil)
                printed += 1
            }
        } catch {
            await deliveries.close()
            throw error
        }
        await deliveries.close()
    }
}
