// Connecting to a running `herald serve` as a client (HeraldClient's producer): token resolution, TLS options and the hello.
import ArgumentParser
import Dispatch
import Foundation
import HeraldClient
import HeraldCommandLine
import Synchronization

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

    /// --tls-ca and the client certificate, nil without --tls-ca.
    var tls: TLSOptions? { tlsCA.map { TLSOptions(caFile: $0, certificateFile: tlsCert, keyFile: tlsKey) } }

    /// Connects and says hello, runs `body` with the producer, then closes it. A refused hello, a
    /// connection that fails or a refusal `body` throws is logged (`failed` words it) and ends the command (exit 2).
    func withProducer<T: Sendable>(failed: @escaping @Sendable (HeraldError) -> String = adminFailure,
                                   _ body: @escaping @Sendable (HeraldProducer) async throws(HeraldError) -> T) throws -> T {
        try HeraldCommands.withProducer(connect: connect, token: resolvedToken(), tls: tls, failed: failed, body)
    }
}

enum HeraldCommands {
    /// Connects a producer to `connect` (HOST:PORT), runs `body` with it and closes it; see
    /// `ServerConnectionOptions.withProducer`. A dropped connection is tried again a few times
    /// (what was unanswered is sent again), then the command fails.
    static func withProducer<T: Sendable>(connect: String, token: String?, tls: TLSOptions?,
                                          failed: @escaping @Sendable (HeraldError) -> String,
                                          _ body: @escaping @Sendable (HeraldProducer) async throws(HeraldError) -> T) throws -> T {
        guard let (host, port) = hostAndPort(connect) else { throw ValidationError("--connect must be HOST:PORT") }
        let outcome = runBlocking { () async -> Result<T, HeraldError> in
            do throws(HeraldError) {
                let producer = try await HeraldProducer.connect(host: host, port: port, token: token, tls: tls,
                                                                backoff: Backoff(initialMilliseconds: 50, maximumMilliseconds: 1_000, attempts: 3))
                let result: Result<T, HeraldError>
                do throws(HeraldError) { result = .success(try await body(producer)) } catch { result = .failure(error) }
                await producer.close()
                return result
            } catch {
                return .failure(error)
            }
        }
        switch outcome {
        case .success(let value): return value
        case .failure(let error):
            Log.info(failed(error))
            throw ExitCode.error
        }
    }
}

/// How an admin command words a failure: a refused hello, the client's own failure, or the server's refusal of the op (its title and detail).
@Sendable func adminFailure(_ error: HeraldError) -> String {
    switch error.kind {
    case .authentication: return "hello refused: \(error)"
    case .client: return "error: \(error)"
    default: return "error: \(error.title)\n\(error.detail)"
    }
}

/// Runs `body` on the concurrency runtime and waits for it (the commands are synchronous: the root command is).
func runBlocking<T: Sendable>(_ body: @escaping @Sendable () async -> T) -> T {
    let result = Mutex<T?>(nil)
    let done = DispatchSemaphore(value: 0)
    Task {
        let value = await body()
        result.withLock { $0 = value }
        done.signal()
    }
    done.wait()
    return result.withLock { $0! }
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
