// Runs a real HeraldService on its own thread against the test run's PostgreSQL.
import Foundation
import HeraldCore
import HeraldRuntime
import HeraldTestSupport

/// A service on a background thread, listening on a free loopback port, manual clock.
final class TestServer: @unchecked Sendable {
    let service: HeraldService
    let port: Int
    let url: String
    private let thread: Thread
    private let stopped = DispatchSemaphore(value: 0)

    init(url: String? = nil, start: String = "2026-03-27T07:00:00Z", tokens: TokenTable = TokenTable(),
         configure: (inout ServiceConfiguration) -> Void = { _ in }) throws {
        self.url = try url ?? TestPostgres.freshDatabase()
        var config = ServiceConfiguration(databaseURL: self.url)
        config.port = 0
        config.clock = .manual(start: Instant(rfc3339: start)!)
        config.tokens = tokens
        config.handleSignals = false
        configure(&config)
        service = HeraldService(configuration: config) { _ in }
        port = try service.start()
        // The service is used only by its loop thread from here on (requestShutdown is thread-safe).
        nonisolated(unsafe) let service = self.service
        let done = stopped
        thread = Thread {
            service.run()
            done.signal()
        }
        thread.start()
    }

    func client(hello: Bool = true, token: String = "dev-token") throws -> WireClient {
        let c = try WireClient(port: port)
        if hello {
            let r = try c.request(#"{"op":"hello","token":"\#(token)"}"#)
            precondition(r["ok"]?.boolValue == true, "hello failed: \(r.canonicalString)")
        }
        return c
    }

    /// A client over TLS (the handshake done); says hello unless told not to.
    func tlsClient(_ options: TLSClientOptions, hello: Bool = true, token: String? = "dev-token") throws -> WireClient {
        let c = try WireClient(port: port, tls: options)
        if hello {
            let r = try c.call(token.map { ["op": "hello", "token": .string($0)] } ?? ["op": "hello"])
            precondition(r["ok"]?.boolValue == true, "hello failed: \(r.canonicalString)")
        }
        return c
    }

    /// Graceful stop; waits for the loop to end.
    func stop() {
        service.requestShutdown()
        _ = stopped.wait(timeout: .now() + 15)
    }
}

extension WireClient {
    /// Sends a request built from a JSON literal and returns its reply.
    func call(_ object: JSONValue) throws -> JSONValue {
        try request(object.canonicalString)
    }

    /// Reads lines until `count` deliveries arrived (replies in between are skipped).
    func deliveries(_ count: Int, timeoutMilliseconds: Int32 = 10_000) throws -> [JSONValue] {
        var out: [JSONValue] = []
        while out.count < count {
            let v = try readJSON(timeoutMilliseconds: timeoutMilliseconds)
            if v["op"]?.stringValue == "delivery" { out.append(v) }
        }
        return out
    }
}
