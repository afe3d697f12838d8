// The Docker setup: docker-compose.yml as docker-compose reads it, the Dockerfile, and their health check (`herald health`) against a real `herald serve`.
import Foundation
import Glibc
import HeraldCore
@testable import HeraldRuntime
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

    // MARK: docker-compose.yml and the Dockerfile

    /// The package's root (this file is Tests/HeraldRuntimeTests/…).
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    /// `docker-compose` on $PATH (Debian's package; scripts/bootstrap installs it).
    static let dockerCompose: String? = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin")
        .split(separator: ":").map { "\($0)/docker-compose" }.first { FileManager.default.isExecutableFile(atPath: $0) }

    /// Runs `executable` with `arguments` in the package root, `stdin` on its standard input.
    static func run(_ executable: String, _ arguments: [String], stdin: String = "") throws -> HeraldCommandTests.Outcome {
        let dir = FileManager.default.temporaryDirectory.path
        let tag = "herald-deploy-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let input = "\(dir)/\(tag).in", out = "\(dir)/\(tag).out", err = "\(dir)/\(tag).err"
        _ = FileManager.default.createFile(atPath: input, contents: Data(stdin.utf8))
        _ = FileManager.default.createFile(atPath: out, contents: nil)
        _ = FileManager.default.createFile(atPath: err, contents: nil)
        defer { for path in [input, out, err] { try? FileManager.default.removeItem(atPath: path) } }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: executable)
        p.arguments = arguments
        p.currentDirectoryURL = URL(fileURLWithPath: packageRoot)
        p.standardInput = try FileHandle(forReadingFrom: URL(fileURLWithPath: input))
        p.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: out))
        p.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: err))
        try p.run()
        p.waitUntilExit()
        return .init(status: p.terminationStatus, stdout: try String(contentsOfFile: out, encoding: .utf8),
                     stderr: try String(contentsOfFile: err, encoding: .utf8))
    }

    /// `docker-compose config`'s view of docker-compose.yml (interpolated, defaults filled in), as
    /// JSON: its YAML read by the Python YAML module docker-compose itself depends on.
    static func composeConfig() throws -> JSONValue {
        let config = try run(try #require(dockerCompose), ["-f", "docker-compose.yml", "config"])
        try #require(config.status == 0, "docker-compose refused docker-compose.yml: \(config)")
        let json = try run("/usr/bin/env", ["python3", "-c", "import json, sys, yaml; print(json.dumps(yaml.safe_load(sys.stdin)))"], stdin: config.stdout)
        try #require(json.status == 0, "\(json)")
        return try JSONValue.parse(Array(json.stdout.utf8))
    }

    /// A compose duration ("90s", "1m30s", "2m") in seconds.
    static func seconds(_ duration: String) -> Double? {
        var total = 0.0, number = ""
        var rest = Substring(duration)
        while let c = rest.first {
            if c.isNumber || c == "." { number.append(c); rest = rest.dropFirst(); continue }
            let unit = String(rest.prefix { $0.isLetter })
            guard let value = Double(number), let scale = ["h": 3600.0, "m": 60, "s": 1, "ms": 0.001][unit] else { return nil }
            total += value * scale
            number = ""
            rest = rest.dropFirst(unit.count)
        }
        return number.isEmpty ? total : nil
    }

    static func strings(_ value: JSONValue?) -> [String] { value?.arrayValue?.compactMap(\.stringValue) ?? [] }

    /// docker-compose accepts the file; Herald's service has a working health check, takes its
    /// grants from the herald_tokens secret (never dev mode on the published port), and gets a
    /// stop grace period longer than a graceful stop's drain.
    @Test(.enabled(if: dockerCompose != nil, "docker-compose is not installed: apt-get install docker-compose (scripts/bootstrap does)"))
    func composeFileIsAcceptedAndServesWithTokensAHealthCheckAndAGracePeriod() throws {
        let config = try Self.composeConfig()
        let herald = try #require(config["services"]?["herald"], "no herald service in \(config.canonicalString)")

        let test = Self.strings(herald["healthcheck"]?["test"])
        #expect(test == ["CMD", "herald", "health"], "\(herald.canonicalString)")
        let interval = try #require(herald["healthcheck"]?["interval"]?.stringValue.flatMap(Self.seconds))
        let timeout = try #require(herald["healthcheck"]?["timeout"]?.stringValue.flatMap(Self.seconds))
        #expect(timeout > 3 && timeout < interval, "the probe waits up to 3 s; Docker's timeout \(timeout) s must exceed it, within the interval \(interval) s")

        let secrets = herald["secrets"]?.arrayValue?.compactMap { $0["source"]?.stringValue ?? $0.stringValue } ?? []
        #expect(secrets == ["herald_tokens"], "\(herald.canonicalString)")
        let file = try #require(config["secrets"]?["herald_tokens"]?["file"]?.stringValue, "the herald_tokens secret names no file")
        #expect(file.hasSuffix("/deploy/tokens.json"), "\(file)")

        let command = Self.strings(herald["command"])
        #expect(command.first == "serve")
        let tokens = command.firstIndex(of: "--tokens").map { command.index(after: $0) }.flatMap { command.indices.contains($0) ? command[$0] : nil }
        #expect(tokens == "/run/secrets/herald_tokens", "serve without the secret's tokens file: \(command)")
        for (name, service) in config["services"]?.objectValue ?? [:] where Self.strings(service["command"]).contains("serve") {
            #expect(Self.strings(service["command"]).contains("--tokens"), "service \(name) serves in dev mode")
        }

        let grace = try #require(herald["stop_grace_period"]?.stringValue.flatMap(Self.seconds), "no stop_grace_period")
        #expect(grace >= 60 && grace > Double(ServiceLifecycle.drainMilliseconds) / 1000,
                "a graceful stop finishes commits, drains connections for up to \(ServiceLifecycle.drainMilliseconds / 1000) s and writes a snapshot; \(grace) s is too short")
    }

    /// The image runs the same: serve with the secret's tokens file, the same health check, the
    /// allocator tuning.
    @Test func dockerfileServesWithTokensAndChecksHealth() throws {
        let text = try String(contentsOfFile: Self.packageRoot + "/Dockerfile", encoding: .utf8)
        let lines = text.split(separator: "\n").map(String.init)
        let cmd = try #require(lines.last { $0.hasPrefix("CMD ") })
        #expect(cmd.contains(#""serve""#) && cmd.contains(#""--tokens", "/run/secrets/herald_tokens""#), "\(cmd)")
        let health = try #require(lines.first { $0.hasPrefix("HEALTHCHECK ") })
        #expect(health.hasSuffix(#"CMD ["herald", "health"]"#), "\(health)")
        #expect(lines.contains { $0.hasPrefix("ENV GLIBC_TUNABLES=glibc.malloc.tcache_count=") })
    }

    /// The example tokens file loads (it is what `serve --tokens` accepts), holds hashes only, and
    /// the compose file's health check command, run as Docker would against that service, passes.
    @Test(.enabled(if: dockerCompose != nil, "docker-compose is not installed: apt-get install docker-compose (scripts/bootstrap does)"))
    func composeHealthCheckPassesAgainstAServeWithTheExampleTokens() throws {
        let example = Self.packageRoot + "/deploy/tokens.example.json"
        let parsed = try JSONValue.parse(Array(try String(contentsOfFile: example, encoding: .utf8).utf8))
        for entry in parsed["tokens"]?.arrayValue ?? [] {
            #expect(entry["token"] == nil && entry["sha256"]?.stringValue?.count == 64, "\(entry.canonicalString)")
        }
        let test = Self.strings(try Self.composeConfig()["services"]?["herald"]?["healthcheck"]?["test"])
        try #require(test.starts(with: ["CMD", "herald"]), "\(test)")

        let url = try TestPostgres.freshDatabase()
        let log = try Self.temporaryFile("serve.log", "")
        defer { try? FileManager.default.removeItem(atPath: log) }
        let serve = try ServeProcess(databaseURL: url, logPath: log, extraArguments: ["--tokens", example])
        try serve.start()
        defer { serve.terminate() }
        let healthy = try HeraldCommandTests.herald(Array(test.dropFirst(2)) + ["--connect", "127.0.0.1:\(serve.port)"])
        #expect(healthy.status == 0, "\(healthy)")
        serve.terminate()
        let stopped = try HeraldCommandTests.herald(Array(test.dropFirst(2)) + ["--connect", "127.0.0.1:\(serve.port)"])
        #expect(stopped.status == 1, "\(stopped)")
    }
}
