// The container's health check (`herald health`) against a real `herald serve`, a closed port, a silent listener and a stranger.
import Foundation
import Glibc
import HeraldTestSupport
import Testing

@Suite struct DeploymentFilesTests {
    /// A temporary file holding `text`; the caller removes it.
    static func temporaryFile(_ name: String, _ text: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.path + "/herald-deploy-\(getpid())-\(UInt32.random(in: 0...UInt32.max))-\(name)"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// The image's health check command passes against a running service with a tokens file (ping
    /// needs no hello, so the probe needs no token).
    @Test func healthCheckPassesAgainstARunningServeWithTokens() throws {
        let url = try TestPostgres.freshDatabase()
        let tokens = try Self.temporaryFile("tokens.json", #"{"tokens":[{"name":"ops","sha256":"\#(String(repeating: "ab", count: 32))","roles":["admin"]}]}"#)
        let log = try Self.temporaryFile("serve.log", "")
        defer { try? FileManager.default.removeItem(atPath: tokens); try? FileManager.default.removeItem(atPath: log) }
        let serve = try ServeProcess(databaseURL: url, logPath: log, extraArguments: ["--tokens", tokens])
        try serve.start()
        defer { serve.terminate() }
        let outcome = try HeraldCommandTests.herald(["health", "--connect", "127.0.0.1:\(serve.port)"])
        #expect(outcome.status == 0, "\(outcome)")
        #expect(outcome.stdout.hasPrefix("healthy: 127.0.0.1:\(serve.port) answered a ping"), "\(outcome)")
    }

    /// Nothing listening: unhealthy (exit 1, Docker's code for a failed check) with the reason.
    @Test func healthCheckFailsAgainstAClosedPort() throws {
        let port = LocalClusterPort.free()
        let outcome = try HeraldCommandTests.herald(["health", "--connect", "127.0.0.1:\(port)"])
        #expect(outcome.status == 1, "\(outcome)")
        #expect(outcome.stderr.contains("unhealthy: could not connect: 127.0.0.1:\(port): Connection refused"), "\(outcome)")
    }

    /// A loopback listener that accepts nothing (connections wait in its backlog): its descriptor and port.
    static func silentListener() throws -> (fd: Int32, port: Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && listen(fd, 8) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        if !bound { close(fd) }
        try #require(bound)
        return (fd, Int(UInt16(bigEndian: addr.sin_port)))
    }

    /// A listener that never answers (a hung service): unhealthy once `--timeout` has passed,
    /// not when the connection would give up.
    @Test func healthCheckFailsWithinItsTimeoutAgainstASilentListener() throws {
        let (fd, port) = try Self.silentListener()
        defer { close(fd) }
        let started = Date()
        let outcome = try HeraldCommandTests.herald(["health", "--connect", "127.0.0.1:\(port)", "--timeout", "0.5"])
        let seconds = Date().timeIntervalSince(started)
        #expect(outcome.status == 1, "\(outcome)")
        #expect(outcome.stderr.contains("unhealthy: 127.0.0.1:\(port)"), "\(outcome)")
        #expect(seconds < 5, "took \(seconds) s")
    }

    /// Something else on the port (it answers, but not with a pong): unhealthy, saying what it answered.
    @Test func healthCheckFailsWhenTheAnswerIsNotAPong() throws {
        let (fd, port) = try Self.silentListener()
        defer { close(fd) }
        Thread.detachNewThread {
            let client = accept(fd, nil, nil)
            guard client >= 0 else { return }
            var request = [UInt8](repeating: 0, count: 256)
            _ = read(client, &request, request.count)
            let answer = Array(#"{"ok":false,"error":{"code":"unknown_op"}}"#.utf8) + [0x0A]
            _ = write(client, answer, answer.count)
            usleep(500_000)
            close(client)
        }
        let outcome = try HeraldCommandTests.herald(["health", "--connect", "127.0.0.1:\(port)"])
        #expect(outcome.status == 1, "\(outcome)")
        #expect(outcome.stderr.contains(#"answered a ping with {"ok":false,"error":{"code":"unknown_op"}}, not a pong"#), "\(outcome)")
    }

    /// A port or a time-out that does not parse is a usage error (2), not an unhealthy service.
    @Test func healthRejectsAMalformedAddress() throws {
        let outcome = try HeraldCommandTests.herald(["health", "--connect", "localhost"])
        #expect(outcome.status == 2, "\(outcome)")
        #expect(outcome.stderr.contains("--connect must be HOST:PORT"), "\(outcome)")
    }
}
