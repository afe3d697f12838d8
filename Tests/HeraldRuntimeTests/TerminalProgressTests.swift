// `herald export` and `herald import` show progress on stderr when it is a terminal, and nothing of it otherwise.
import Foundation
import Glibc
import HeraldTestSupport
import Testing

@Suite struct TerminalProgressTests {
    static let script = PrometheusScrapeTests.onPath("script")

    /// A log of 1,500 events and their deliveries (one fan-out), exported.
    static func export() throws -> (url: String, export: String) {
        let server = try TestServer(start: "2026-03-27T07:00:00Z")
        defer { server.stop() }
        let users = (0..<1_500).map { "\"u\($0)\"" }.joined(separator: ",")
        let c = try server.client()
        #expect(try c.request(#"{"op":"submit","app":"com.example.mail","users":[\#(users)],"id":"m1","title":"Hi"}"#)["ok"] == true)
        // The deliveries are appended after the ack; a consumer sees them only once they are committed.
        let consumer = try server.client()
        #expect(try consumer.request(#"{"op":"subscribe","consumer":"progress","from":"earliest"}"#)["ok"] == true)
        _ = try consumer.deliveries(1_500)
        let out = try HeraldCommandTests.herald(["export", "--database-url", server.url])
        #expect(out.status == 0, "\(out)")
        return (server.url, out.stdout)
    }

    /// Runs `command` (a shell line) under `script`, on a pseudo-terminal; returns what the terminal showed.
    static func onTerminal(_ command: String) throws -> String {
        let r = try DeploymentFilesTests.run(script!, ["-qfec", command, "/dev/null"])
        #expect(r.status == 0, "\(r)")
        return r.stdout
    }

    @Test(.enabled(if: script != nil, "script (util-linux) is not installed: no pseudo-terminal to run the commands on"))
    func exportAndImportShowProgressOnATerminalOnly() throws {
        let (url, text) = try Self.export()
        #expect(text.split(separator: "\n").count > 3_000)
        let herald = try ServeProcess.findBinary()
        let file = FileManager.default.temporaryDirectory.path + "/herald-progress-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).ndjson"
        try text.write(toFile: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: file) }

        // Not a terminal: the result line only.
        let plain = try HeraldCommandTests.herald(["export", "--database-url", url])
        #expect(!plain.stderr.contains("\r") && !plain.stderr.contains("export:"), "\(plain.stderr)")
        #expect(plain.stderr.contains("exported 1500 events"))

        // On a terminal: the rows written of those there are, rewritten in place, then cleared.
        let shown = try Self.onTerminal("'\(herald)' export --database-url '\(url)' > /dev/null")
        #expect(shown.contains("\rexport: ") && shown.contains(" rows of ") && shown.contains("%)"), "\(shown.debugDescription)")
        #expect(shown.contains("exported 1500 events"))

        // import: a redirected file shows bytes of its size; a pipe, lines.
        let target = try TestPostgres.freshDatabase()
        let importing = try Self.onTerminal("'\(herald)' import --database-url '\(target)' < '\(file)'")
        #expect(importing.contains("\rimport: ") && importing.contains(" bytes of "), "\(importing.debugDescription)")
        #expect(importing.contains("imported 1500 events"))
        let quiet = try HeraldCommandTests.herald(["import", "--database-url", try TestPostgres.freshDatabase()], input: text)
        #expect(quiet.status == 0 && !quiet.stderr.contains("\r"), "\(quiet)")
    }
}
