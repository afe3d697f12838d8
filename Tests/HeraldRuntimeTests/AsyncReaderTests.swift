// The loop's read connection: it reconnects without blocking the loop, even to a server that never answers.
import Foundation
import Glibc
@testable import HeraldRuntime
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct AsyncReaderTests {
    /// A TCP listener that completes handshakes (the kernel's backlog) and never answers: a
    /// black-holed PostgreSQL. A blocking connect to it waits `connect_timeout` (10 s).
    final class SilentServer {
        let fd: Int32
        let port: Int
        init() throws {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            self.fd = fd
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            address.sin_port = 0
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) { p in
                p.withMemoryRebound(to: sockaddr.self, capacity: 1) { a -> Bool in
                    bind(fd, a, length) == 0 && listen(fd, 16) == 0 && getsockname(fd, a, &length) == 0
                }
            }
            guard bound else { throw WireClient.Failure.closed }
            port = Int(UInt16(bigEndian: address.sin_port))
        }
        deinit { close(fd) }
    }

    /// Mutable state shared with the loop's callbacks (the test thread runs the loop itself).
    final class Box {
        var ticks = 0
        var results: [Bool] = []
        var logs: [String] = []
    }

    static func run(_ loop: EventLoop, milliseconds: Int64, until done: () -> Bool = { false }) {
        let end = ClientConnection.monotonicMilliseconds() + milliseconds
        while ClientConnection.monotonicMilliseconds() < end && !done() { loop.runOnce(block: true) }
    }

    @Test func reconnectingToAServerThatNeverAnswersLeavesTheLoopRunning() throws {
        let url = try TestPostgres.freshDatabase()
        let silent = try SilentServer()
        let loop = EventLoop()
        let box = Box()
        // The reader's first connection is real; its reconnects go to the silent server.
        let reader = AsyncReader(loop: loop, url: "host=127.0.0.1 port=\(silent.port) dbname=herald user=herald")
        reader.log = { box.logs.append($0) }
        let conn = try PGConnection.connect(url)
        let pid = conn.backendPID
        try reader.adopt(conn)
        var ticker: LoopEvent?
        ticker = loop.timer {
            box.ticks += 1
            ticker?.arm(afterMilliseconds: 10)
        }
        ticker?.arm(afterMilliseconds: 10)

        reader.query("SELECT 1", []) { box.results.append((try? $0.get()) != nil) }
        Self.run(loop, milliseconds: 5_000) { !box.results.isEmpty }
        #expect(box.results == [true])

        let admin = try PGConnection.connect(url)
        defer { admin.close() }
        try admin.execute("SELECT pg_terminate_backend($1::int)", [String(pid)])
        Self.run(loop, milliseconds: 5_000) { !box.logs.isEmpty }
        #expect(box.logs.contains { $0.contains("lost the read connection") }, "\(box.logs)")
        // A read asked for now waits for the attempt under way (to the silent server).
        reader.query("SELECT 1", []) { box.results.append((try? $0.get()) != nil) }
        let before = box.ticks
        Self.run(loop, milliseconds: 1_000)
        #expect(box.ticks - before >= 50, "the loop kept turning while the reader reconnects: \(box.ticks - before) ticks of 10 ms in 1 s")
        #expect(box.results == [true], "the read waits for the attempt, which has not finished")
        #expect(!reader.isConnected)
        ticker = nil
    }
}
