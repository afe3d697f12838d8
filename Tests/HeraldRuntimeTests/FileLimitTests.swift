// The open-file limit bounds the connections: past it a client is told `busy`, never left hanging
// while the service spins on a failing accept().
import Foundation
import Glibc
import HeraldCore
import HeraldRuntime
import HeraldTestSupport
import Testing

@Suite struct FileLimitTests {
    /// `herald serve` under `ulimit -n 128` (--max-connections 10,000 by default) with 200
    /// connections opened: were the limit ignored, accept() would fail with EMFILE in a tight
    /// loop (a flood of libevent warnings, a busy core) and the clients past the limit would hang
    /// without a word. The service serves what the limit allows, says so at start, and answers
    /// the rest `busy`.
    @Test func pastWhatTheOpenFileLimitAllowsAClientIsToldBusy() throws {
        let url = try TestPostgres.freshDatabase()
        let log = FileManager.default.temporaryDirectory.path + "/herald-nofile-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).log"
        defer { try? FileManager.default.removeItem(atPath: log) }
        let serve = try ServeProcess(databaseURL: url, logPath: log)
        serve.openFileLimit = 128
        try serve.start()
        defer { serve.terminate() }
        let allowed = FileLimit.connections(allowedBy: 128)
        let text = { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }
        #expect(text().contains("serving at most \(allowed) connections"), "\(text())")

        let first = try WireClient(port: serve.port)
        let hello = try first.request(#"{"op":"hello","token":"x"}"#)
        #expect(hello["ok"] == true, "\(hello.canonicalString)")
        var clients: [WireClient] = []
        var busy = 0
        for _ in 0..<(allowed + 20) {
            let c = try WireClient(port: serve.port)
            clients.append(c)
        }
        for c in clients {
            guard let line = try? c.readLine(timeoutMilliseconds: 50), let reply = try? JSONValue.parse(line) else { continue }
            if reply["error"]?["code"] == "busy" { busy += 1 }
        }
        #expect(busy >= 21, "\(busy) of \(clients.count) told busy; \(allowed) allowed")
        let stats = try first.request(#"{"op":"stats"}"#)
        #expect(stats["connectionLimit"] == .int(Int64(allowed)))
        #expect(stats["acceptFailures"] == 0, "no accept() failed: the limit kept the descriptors in hand")
        #expect(!text().contains("Error from accept"), "libevent's per-call warning never fires")
        for c in clients { c.close() }
    }
}
