// The tokens file over real TCP: hashed tokens, and reloading it without a restart (SIGHUP).
import Foundation
import Glibc
import HeraldCore
import HeraldRuntime
import HeraldTestSupport
import Testing

@Suite struct TokenReloadTests {
    static func entry(_ name: String, _ token: String, roles: [String], apps: [String]? = nil) -> String {
        let appsField = apps.map { #","apps":[\#($0.map { "\"\($0)\"" }.joined(separator: ","))]"# } ?? ""
        return #"{"name":"\#(name)","sha256":"\#(SHA256.hex(token.utf8))","roles":[\#(roles.map { "\"\($0)\"" }.joined(separator: ","))]\#(appsField)}"#
    }

    static func file(_ entries: [String]) -> String { #"{"tokens":[\#(entries.joined(separator: ","))]}"# }

    static func tokensPath() -> String {
        FileManager.default.temporaryDirectory.path + "/herald-tokens-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).json"
    }

    /// Reloads through the same method SIGHUP calls, and waits until the loop ran it: until the
    /// `stats` counter `counted` (a reload or a failure) reaches `count`. The trigger's event and
    /// the observer's request can reach the loop in either order (as under a CPU hog beside the
    /// suite), so one `stats` right after the request may come before the reload.
    static func reload(_ server: TestServer, observer: WireClient, until counted: String, reaches count: Int64) throws -> JSONValue {
        server.service.requestReload()
        var stats = try observer.call(["op": "stats"])
        for _ in 0..<1_000 where (stats[counted]?.intValue ?? 0) < count {
            usleep(10_000)
            stats = try observer.call(["op": "stats"])
        }
        return stats
    }

    @Test func aHashedTokenIsAcceptedAndAWrongOneRefused() throws {
        let path = Self.tokensPath()
        defer { unlink(path) }
        try Self.file([Self.entry("ops", "ops-secret-token", roles: ["admin"])]).write(toFile: path, atomically: true, encoding: .utf8)
        let server = try TestServer { $0.tokensFile = path }
        defer { server.stop() }
        let c = try server.client(hello: false)
        #expect(try c.call(["op": "hello", "token": "ops-secret-token"])["roles"] == ["admin"])
        let d = try server.client(hello: false)
        #expect(try d.call(["op": "hello", "token": "ops-secret-tokeN"])["error"]?["code"] == "invalid_token")
        #expect(try d.call(["op": "hello", "token": .string(SHA256.hex("ops-secret-token".utf8))])["error"]?["code"] == "invalid_token",
                "the stored digest is not itself a token")
    }

    @Test func reloadGrantsNewTokensRevokesRemovedOnesAndKeepsTheTableWhenTheFileIsInvalid() throws {
        let path = Self.tokensPath()
        defer { unlink(path) }
        let ops = Self.entry("ops", "ops-secret-token", roles: ["admin"])
        let mail = Self.entry("mail", "mail-secret-token", roles: ["producer"], apps: ["com.example.mail"])
        try Self.file([ops, mail]).write(toFile: path, atomically: true, encoding: .utf8)
        let server = try TestServer { $0.tokensFile = path }
        defer { server.stop() }
        let observer = try server.client(token: "ops-secret-token")
        let producer = try server.client(token: "mail-secret-token")

        // mail is removed, bank appears.
        let bank = Self.entry("bank", "bank-secret-token", roles: ["producer"], apps: ["com.example.bank"])
        try Self.file([ops, bank]).write(toFile: path, atomically: true, encoding: .utf8)
        let stats = try Self.reload(server, observer: observer, until: "tokenReloads", reaches: 1)
        #expect(stats["tokenReloads"] == 1 && stats["tokenCredentials"] == 2)
        #expect(try producer.readJSON()["error"]?["code"] == "grant_revoked")
        #expect(throws: WireClient.Failure.self) { _ = try producer.readLine(timeoutMilliseconds: 10_000) }
        #expect(try server.client(hello: false).call(["op": "hello", "token": "bank-secret-token"])["apps"] == ["com.example.bank"])
        #expect(try server.client(hello: false).call(["op": "hello", "token": "mail-secret-token"])["error"]?["code"] == "invalid_token")
        #expect(try observer.call(["op": "ping"])["op"] == "pong", "an unchanged grant carries on")

        // An invalid file changes nothing.
        try #"{"tokens":[{"name":"oops","sha256":"not-hex","roles":["admin"]}]}"#.write(toFile: path, atomically: true, encoding: .utf8)
        let after = try Self.reload(server, observer: observer, until: "tokenReloadFailures", reaches: 1)
        #expect(after["tokenReloads"] == 1 && after["tokenReloadFailures"] == 1 && after["tokenCredentials"] == 2)
        #expect(try server.client(hello: false).call(["op": "hello", "token": "bank-secret-token"])["ok"] == true)
    }

    /// A real SIGHUP to this process. Only this test's server handles SIGHUP (the others run
    /// with signals off), and libevent restores the default disposition when it stops.
    @Test func sighupReloadsTheTokensFile() throws {
        let path = Self.tokensPath()
        defer { unlink(path) }
        let ops = Self.entry("ops", "ops-secret-token", roles: ["admin"])
        try Self.file([ops]).write(toFile: path, atomically: true, encoding: .utf8)
        let server = try TestServer { $0.tokensFile = path; $0.handleHangup = true }
        defer { server.stop() }
        let observer = try server.client(token: "ops-secret-token")
        try Self.file([ops, Self.entry("new", "new-secret-token", roles: ["consumer"])]).write(toFile: path, atomically: true, encoding: .utf8)
        kill(getpid(), SIGHUP)
        // The signal is delivered asynchronously (libevent's signal pipe): wait for its effect, not for a time.
        var reloads: Int64 = 0
        for _ in 0..<1_000 where reloads == 0 {
            reloads = try observer.call(["op": "stats"])["tokenReloads"]?.intValue ?? 0
            if reloads == 0 { usleep(10_000) }
        }
        #expect(reloads == 1)
        #expect(try server.client(hello: false).call(["op": "hello", "token": "new-secret-token"])["roles"] == ["consumer"])
    }
}
