// `herald health`: one ping to a running `herald serve` (or a GET of its /readyz with --http), exit 0 on a pong or ready.
import ArgumentParser
import Foundation
import Glibc
import HeraldClient
import HeraldHTTPProbe
import HeraldCommandLine
import HeraldCore

struct Health: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check that a running herald serve answers: exit 0 on a pong (or ready, with --http), 1 otherwise (refused, no reply in time, not a pong, not ready).",
        discussion: "Sends {\"op\":\"ping\"}, which needs no hello and no token, and reads one line. For a container's health check: HEALTHCHECK CMD [\"herald\", \"health\"]. A service serving TLS answers plaintext pings on its --plain-listen address. With --http HOST:PORT (the address given to serve --http) it GETs /readyz instead: ready means restored, not stopping, PostgreSQL connected.")

    @Option(help: "HOST:PORT of the running herald serve.") var connect = "127.0.0.1:7411"
    @Option(help: "Seconds to wait for the connection and the pong together.") var timeout: Double = 3
    @Option(help: "HOST:PORT of serve's --http: GET --path there instead of a ping; 200 is healthy.") var http: String?
    @Option(help: "With --http: the path to GET (/readyz; /healthz only asks whether the loop turns).") var path = "/readyz"

    func validate() throws {
        guard hostAndPort(connect) != nil else { throw ValidationError("--connect must be HOST:PORT, e.g. 127.0.0.1:7411") }
        if let http, hostAndPort(http) == nil { throw ValidationError("--http must be HOST:PORT, e.g. 127.0.0.1:9411") }
        guard path.hasPrefix("/") else { throw ValidationError("--path must start with /, e.g. /readyz") }
        guard timeout > 0, timeout <= 3600 else { throw ValidationError("--timeout must be seconds above 0, e.g. 3") }
    }

    func run() throws {
        let (host, port) = http.flatMap(hostAndPort) ?? hostAndPort(connect)!  // checked in validate()
        let started = Date()
        // The probe's own time-outs are coarse (the connect's is whole seconds): a watchdog bounds
        // the whole probe, so a health check never outlives its limit.
        let limit = timeout
        Thread.detachNewThread {
            Thread.sleep(forTimeInterval: limit)
            Log.info("unhealthy: \(host):\(port) did not answer \(http == nil ? "a ping" : "GET \(path)") within \(limit) s")
            _exit(ExitCode.unhealthy.rawValue)
        }
        if http != nil {
            try probeHTTP(host: host, port: port, started: started)
            return
        }
        let line: String
        do throws(HeraldError) {
            let left = max(1, Int((limit - Date().timeIntervalSince(started)) * 1000))
            line = try HeraldProducer.probe(host: host, port: port, timeoutMilliseconds: left)
        } catch {
            switch error.code {
            case "connect_failed" where error.title.hasPrefix(Self.cannotConnect):
                Log.info("unhealthy: could not connect: \(error.title.dropFirst(Self.cannotConnect.count))")  // it names the address
            case "timeout": Log.info("unhealthy: \(host):\(port): no reply in time")
            case "client_closed": Log.info("unhealthy: \(host):\(port): the server closed the connection")
            default: Log.info("unhealthy: \(host):\(port): \(error)")
            }
            throw ExitCode.unhealthy
        }
        let reply = try? JSONValue.parse(line)
        guard reply?["ok"]?.boolValue == true, reply?["op"]?.stringValue == "pong" else {
            Log.info("unhealthy: \(host):\(port) answered a ping with \(line.prefix(200)), not a pong")
            throw ExitCode.unhealthy
        }
        let milliseconds = Int(Date().timeIntervalSince(started) * 1000)
        print("healthy: \(host):\(port) answered a ping in \(milliseconds) ms")
    }

    /// How HeraldClient's refused connection begins ("Cannot connect to HOST:PORT: reason").
    private static let cannotConnect = "Cannot connect to "
}

extension Health {
    /// `--http`: GET `path`; 200 is healthy, anything else (503 while not ready) unhealthy.
    func probeHTTP(host: String, port: Int, started: Date) throws {
        do {
            let (status, body) = try HTTPProbe.get(host: host, port: port, path: path)
            let said = body.trimmingCharacters(in: .whitespacesAndNewlines)
            guard status == 200 else {
                Log.info("unhealthy: \(host):\(port) answered GET \(path) with \(status): \(said.prefix(200))")
                throw ExitCode.unhealthy
            }
            let milliseconds = Int(Date().timeIntervalSince(started) * 1000)
            print("healthy: \(host):\(port) answered GET \(path) with 200 (\(said.prefix(80))) in \(milliseconds) ms")
        } catch let failure as HTTPProbe.Failure {
            Log.info("unhealthy: \(failure)")
            throw ExitCode.unhealthy
        }
    }
}

extension ExitCode {
    /// Not healthy: Docker's code for a failed check (its 2 is reserved); usage errors stay 2.
    static let unhealthy = ExitCode(1)
}
