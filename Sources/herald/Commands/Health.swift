// `herald health`: one ping to a running `herald serve`, exit 0 on a pong (a container's health check).
import ArgumentParser
import Foundation
import Glibc
import HeraldWireTesting
import HeraldCommandLine
import HeraldCore

struct Health: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check that a running herald serve answers: exit 0 on a pong, 1 otherwise (refused, no reply in time, not a pong).",
        discussion: "Sends {\"op\":\"ping\"}, which needs no hello and no token, and reads one line. For a container's health check: HEALTHCHECK CMD [\"herald\", \"health\"]. A service serving TLS answers plaintext pings on its --plain-listen address.")

    @Option(help: "HOST:PORT of the running herald serve.") var connect = "127.0.0.1:7411"
    @Option(help: "Seconds to wait for the connection and the pong together.") var timeout: Double = 3

    func validate() throws {
        guard hostAndPort(connect) != nil else { throw ValidationError("--connect must be HOST:PORT, e.g. 127.0.0.1:7411") }
        guard timeout > 0, timeout <= 3600 else { throw ValidationError("--timeout must be seconds above 0, e.g. 3") }
    }

    func run() throws {
        let (host, port) = hostAndPort(connect)!  // checked in validate()
        let started = Date()
        // The connect itself has no time-out of its own (a dropped SYN waits minutes): a watchdog
        // bounds the whole probe, so a health check never outlives its limit.
        let limit = timeout
        Thread.detachNewThread {
            Thread.sleep(forTimeInterval: limit)
            Log.info("unhealthy: \(host):\(port) did not answer a ping within \(limit) s")
            _exit(ExitCode.unhealthy.rawValue)
        }
        do {
            let client = try WireClient(host: host, port: port)
            try client.send(#"{"op":"ping"}"#)
            let left = max(1, Int32((limit - Date().timeIntervalSince(started)) * 1000))
            guard let line = try client.readLine(timeoutMilliseconds: left) else {
                throw WireClient.Failure.timeout
            }
            client.close()
            let reply = try? JSONValue.parse(line)
            guard reply?["ok"]?.boolValue == true, reply?["op"]?.stringValue == "pong" else {
                Log.info("unhealthy: \(host):\(port) answered a ping with \(String(decoding: line.prefix(200), as: UTF8.self)), not a pong")
                throw ExitCode.unhealthy
            }
            let milliseconds = Int(Date().timeIntervalSince(started) * 1000)
            print("healthy: \(host):\(port) answered a ping in \(milliseconds) ms")
        } catch let failure as WireClient.Failure {
            if case .connect = failure {
                Log.info("unhealthy: \(failure)")  // it names the address
            } else {
                Log.info("unhealthy: \(host):\(port): \(failure)")
            }
            throw ExitCode.unhealthy
        }
    }
}

extension ExitCode {
    /// Not healthy: Docker's code for a failed check (its 2 is reserved); usage errors stay 2.
    static let unhealthy = ExitCode(1)
}
