// SIGTERM: every request committed before the stop is acknowledged, also to a client that reads late.
import Foundation
import Glibc
import HeraldCore
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct ShutdownDrainTests {
    /// `herald serve` stopped while a client that has not read its acks yet is still pipelining
    /// submits: exiting with the client's input unread would reset the connection and lose the
    /// acks of committed submits. SIGTERM waits, within 10 s, until the closed connections have
    /// delivered their replies and lingered. This test guards the outcome (every committed
    /// submit acknowledged); with default socket buffers it can pass without the wait too — the
    /// loss shows with a client whose receive buffer is small, too slow for a test to wait on.
    @Test func sigtermAcknowledgesEveryCommittedRequestToAClientReadingLate() throws {
        let url = try TestPostgres.freshDatabase()
        let log = FileManager.default.temporaryDirectory.path + "/herald-drain-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).log"
        defer { try? FileManager.default.removeItem(atPath: log) }
        let serve = try ServeProcess(databaseURL: url, logPath: log)
        try serve.start()
        defer { serve.terminate() }
        let c = try WireClient(port: serve.port)
        #expect(try c.request(#"{"op":"hello","token":"x"}"#)["ok"] == true)
        #expect(try c.request(#"{"op":"authorization","user":"alice","app":"com.example.mail","status":"authorized","options":["alert"]}"#)["ok"] == true)
        var batch: [UInt8] = []
        for i in 0..<30_000 {
            batch += Array(#"{"op":"submit","rid":\#(i),"app":"com.example.mail","user":"alice","id":"d\#(i)","title":"Hi"}"#.utf8) + [0x0A]
        }
        var sent = 0
        while sent < batch.count, let n = c.trySend(Array(batch[sent...])) {
            sent += n
            if n == 0 { break }  // the server stopped reading (backpressure): leave the rest unsent
        }
        // Wait until some are committed, then stop the service while acks are still owed.
        let conn = try PGConnection.connect(url)
        var stored: Int64 = 0
        for _ in 0..<500 where stored < 500 {
            stored = try conn.execute("SELECT count(*) FROM events WHERE type = 'submit'").int64(0, 0) ?? 0
            usleep(10_000)
        }
        kill(serve.pid, SIGTERM)
        usleep(1_000_000)  // the client is busy elsewhere while the service stops
        var acks = 0
        while let line = try? c.readLine(timeoutMilliseconds: 15_000), let reply = try? JSONValue.parse(line) {
            if reply["ok"] == true { acks += 1 }
        }
        serve.terminate()
        let committed = try conn.execute("SELECT count(*) FROM events WHERE type = 'submit'").int64(0, 0) ?? -1
        #expect(committed > 0 && Int64(acks) == committed, "\(acks) acks for \(committed) committed submits (\(sent) bytes sent); log: \((try? String(contentsOfFile: log, encoding: .utf8))?.suffix(1500) ?? "")")
    }
}
