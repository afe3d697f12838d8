// SIGTERM and SIGINT stop `herald serve` as a lame duck: goodbye on every connection, every request read answered, then the close.
import Foundation
import Glibc
import HeraldWireTesting
import HeraldCore
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct LameDuckStopTests {
    static let goodbye = #"{"op":"goodbye","reason":"shutting_down"}"#

    /// Every line of `client` until the server closes the connection (fails on a time-out).
    static func linesUntilClosed(_ client: WireClient) -> (lines: [String], closed: Bool) {
        var lines: [String] = []
        while true {
            do {
                guard let line = try client.readLine(timeoutMilliseconds: 20_000) else { return (lines, false) }
                lines.append(String(decoding: line, as: UTF8.self))
            } catch {
                return (lines, true)
            }
        }
    }

    /// Stopped while a producer pipelines submits: the producer was once answered with a bare
    /// close, not told why. Now every connection — the producer's, a consumer's, an idle one —
    /// gets one `goodbye` line; the producer's requests read before it are all answered (a
    /// prefix of what it sent, in order), what it sent after is neither answered nor stored
    /// (docs/protocol.md: not read), so the acknowledged submits are exactly those in the log;
    /// then each connection closes and the process exits.
    @Test(arguments: [SIGTERM, SIGINT])
    func aStopUnderPipelinedLoadSaysGoodbyeAnswersWhatWasReadAndLosesNoAck(signal: Int32) throws {
        let url = try TestPostgres.freshDatabase()
        let log = FileManager.default.temporaryDirectory.path + "/herald-lameduck-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).log"
        defer { try? FileManager.default.removeItem(atPath: log) }
        let serve = try ServeProcess(databaseURL: url, logPath: log)
        try serve.start()
        defer { serve.terminate() }

        let consumer = try WireClient(port: serve.port)
        #expect(try consumer.request(#"{"op":"hello","token":"x"}"#)["ok"] == true)
        #expect(try consumer.request(#"{"op":"subscribe","consumer":"c","from":"earliest"}"#)["ok"] == true)
        let idle = try WireClient(port: serve.port)
        #expect(try idle.request(#"{"op":"hello","token":"x"}"#)["ok"] == true)
        let producer = try WireClient(port: serve.port)
        #expect(try producer.request(#"{"op":"hello","token":"x"}"#)["ok"] == true)
        #expect(try producer.request(#"{"op":"registerApp","app":"com.example.mail","entitlements":[]}"#)["ok"] == true)

        // Pipelined submits, sent from a thread of their own until the server stops reading.
        let total = 100_000
        let producerForSender = producer
        let senderDone = DispatchSemaphore(value: 0)
        let sender = Thread {
            defer { senderDone.signal() }
            let producer = producerForSender
            var batch: [UInt8] = []
            for i in 0..<total {
                batch += Array(#"{"op":"submit","rid":\#(i),"app":"com.example.mail","user":"u\#(i % 50)","id":"d\#(i)","title":"Hi","hiddenPreviewsBodyPlaceholder":"x"}"#.utf8) + [0x0A]
            }
            var sent = 0, stalled = 0
            while sent < batch.count, stalled < 300, let n = producer.trySend(Array(batch[sent..<min(batch.count, sent + 65_536)])) {
                sent += n
                if n == 0 { stalled += 1; usleep(10_000) } else { stalled = 0 }
            }
        }
        sender.start()
        let conn = try PGConnection.connect(url)
        var stored: Int64 = 0
        for _ in 0..<1_000 where stored < 2_000 {
            stored = try conn.execute("SELECT count(*) FROM events WHERE type = 'submit'").int64(0, 0) ?? 0
            usleep(5_000)
        }
        #expect(stored >= 2_000, "the load is under way before the stop")
        kill(serve.pid, signal)

        let (lines, closed) = Self.linesUntilClosed(producer)
        #expect(closed, "the producer's connection closes after its replies")
        #expect(lines.filter { $0 == Self.goodbye }.count == 1, "one goodbye: \(lines.filter { $0.contains("goodbye") })")
        let replies = lines.filter { $0 != Self.goodbye }.compactMap { try? JSONValue.parse(Array($0.utf8)) }
        let rids = replies.compactMap { $0["rid"]?.intValue }
        #expect(replies.allSatisfy { $0["ok"] == true }, "every request read is acknowledged: \(replies.first { $0["ok"] != true }?.canonicalString ?? "")")
        #expect(rids == (0..<Int64(rids.count)).map { $0 }, "the requests read are a prefix of those sent, answered in order")
        #expect(rids.count < total, "the stop came while submits were still being sent")

        let consumerLines = Self.linesUntilClosed(consumer)
        #expect(consumerLines.closed && consumerLines.lines.contains(Self.goodbye), "the consumer is told goodbye, then closed")
        let idleLines = Self.linesUntilClosed(idle)
        #expect(idleLines.closed && idleLines.lines == [Self.goodbye], "\(idleLines.lines)")
        senderDone.wait()  // its sends fail once the connection is closed

        #expect(serve.terminate(timeoutSeconds: 30), "the process exits after the drain")
        let ids = try conn.execute("SELECT notification_id FROM events WHERE type = 'submit'")
        let storedIds = Set((0..<ids.rowCount).compactMap { ids.string($0, 0) })
        #expect(storedIds == Set(rids.map { "d\($0)" }),
                "acknowledged = stored: \(rids.count) acks, \(storedIds.count) stored; log: \(serve.tail(20))")
    }
}
