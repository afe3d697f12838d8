// `herald bridge nats` against a real nats-server with JetStream on disk: crashes of the bridge and
// of nats-server lose nothing and store nothing twice (issue 44, experiments 1 and 2).
import Foundation
import Glibc
import HeraldCore
import HeraldStore
import HeraldTestSupport
import Testing

/// A child process whose output goes to a log file: the bridge, nats-server.
final class ChildProcess: @unchecked Sendable {
    // Why @unchecked Sendable: used from the test's thread only.
    let process = Process()
    let logPath: String

    init(_ executable: String, _ arguments: [String], logPath: String) throws {
        self.logPath = logPath
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        log.seekToEndOfFile()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardOutput = log
        process.standardError = log
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    /// SIGKILL, as a crash; waits for it to be gone.
    func kill9() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// SIGTERM; waits up to `seconds`, then SIGKILL. True if it stopped by itself.
    @discardableResult
    func terminate(seconds: Double = 20) -> Bool {
        guard process.isRunning else { return true }
        kill(process.processIdentifier, SIGTERM)
        let deadline = Date().addingTimeInterval(seconds)
        while process.isRunning && Date() < deadline { usleep(20_000) }
        if process.isRunning { kill9(); return false }
        return true
    }

    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }
}

/// nats-server with JetStream storing in its own folder, on a free loopback port; restartable on the same folder and port.
final class NatsServer: @unchecked Sendable {
    static let binary = ["/usr/sbin/nats-server", "/usr/bin/nats-server", "/usr/local/bin/nats-server"]
        .first { FileManager.default.isExecutableFile(atPath: $0) }
    static var available: Bool { binary != nil }

    let port = LocalClusterPort.free()
    let directory: String
    private(set) var child: ChildProcess?
    var url: String { "nats://127.0.0.1:\(port)" }

    init() throws {
        directory = FileManager.default.temporaryDirectory.path + "/herald-nats-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try start()
    }

    func start() throws {
        // A restart appends to the same log: only what this start wrote counts.
        let before = (child?.log.utf8.count ?? 0)
        child = try ChildProcess(Self.binary!, ["-js", "-sd", directory + "/js", "-a", "127.0.0.1", "-p", String(port)],
                                 logPath: directory + "/nats-server.log")
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if let log = child?.log, log.utf8.count > before, String(decoding: log.utf8.dropFirst(before), as: UTF8.self).contains("Server is ready") { return }
            usleep(20_000)
        }
        throw ExperimentError("nats-server did not start within 20 s:\n\(child?.log.suffix(2000) ?? "")")
    }

    func kill9() { child?.kill9() }

    func stop() {
        child?.terminate()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

@Suite(.serialized, .enabled(if: NatsServer.available, "nats-server is not installed: run scripts/bootstrap (Debian's nats-server package)"))
struct NatsBridgeTests {
    /// Deliveries of experiment 1 in the suite (scripts/bridge-nats-experiments runs 100,000).
    static let deliveries = Int(ProcessInfo.processInfo.environment["HERALD_BRIDGE_DELIVERIES"] ?? "") ?? 25_000

    static func herald() throws -> String { try ServeProcess.findBinary() }

    static func bridge(_ server: TestServer, _ nats: NatsServer, stream: String, log: String, extra: [String] = []) throws -> ChildProcess {
        try ChildProcess(herald(), ["bridge", "nats", "--herald", "127.0.0.1:\(server.port)", "--consumer", "bridge",
                                    "--url", nats.url, "--stream", stream] + extra, logPath: log)
    }

    /// The stream's messages in stream order: `(subject, Nats-Msg-Id)`, via `herald bridge nats-read`.
    static func streamMessages(_ nats: NatsServer, stream: String, payload: Bool = false) throws -> [JSONValue] {
        let out = try HeraldCommandTests.herald(["bridge", "nats-read", "--url", nats.url, "--stream", stream] + (payload ? ["--payload"] : []))
        guard out.status == 0 else { throw ExperimentError("nats-read failed: \(out)") }
        return try out.stdout.split(separator: "\n").map { try JSONValue.parse(Array($0.utf8)) }
    }

    /// Submits `count` notifications for alice (one alert delivery each) pipelined, on a thread of its own.
    static func produce(_ server: TestServer, count: Int, prefix: String) -> Thread {
        let thread = Thread {
            do {
                let c = try server.client()
                var sent = 0, acked = 0
                while acked < count {
                    while sent < count && sent - acked < 256 {
                        try c.send(#"{"op":"submit","id":"\#(prefix)\#(sent)","app":"com.example.mail","user":"alice","title":"T","body":"B","hiddenPreviewsBodyPlaceholder":"x"}"#)
                        sent += 1
                    }
                    _ = try c.readLine(timeoutMilliseconds: 30_000)
                    acked += 1
                }
            } catch {
                Issue.record("producer: \(error)")
            }
        }
        thread.start()
        return thread
    }

    /// The delivery head once every submit's deliveries are committed (a clock move replies after them).
    static func settledHead(_ c: WireClient) throws -> Int64 {
        _ = try c.call(["op": "clock", "advanceTo": "2026-03-27T07:00:01Z"])
        return try ConsumerAdministrationTests.head(c)
    }

    /// The bridge consumer's acknowledged cursor (0 before it subscribed).
    static func acked(_ c: WireClient) throws -> Int64 {
        try ConsumerAdministrationTests.listed(c, "bridge")?["partitions"]?.arrayValue?.first?["acked"]?.intValue ?? 0
    }

    /// Waits until `condition` holds of the bridge's acknowledged cursor (polled every 20 ms, at most `seconds`).
    static func waitForAck(_ c: WireClient, seconds: Double, _ condition: (Int64) -> Bool) throws -> Int64 {
        let deadline = Date().addingTimeInterval(seconds)
        var acked = try Self.acked(c)
        while !condition(acked) && Date() < deadline {
            usleep(20_000)
            acked = try Self.acked(c)
        }
        return acked
    }

    /// Every `(partition, cursor)` of 1…head once, in cursor order, each message's subject and payload the delivery's.
    static func checkExactlyOnceInOrder(_ messages: [JSONValue], head: Int64) {
        let ids = messages.compactMap { $0["id"]?.stringValue }
        #expect(ids.count == messages.count, "every message has a Nats-Msg-Id")
        let expected = (1...head).map { "0:\($0)" }
        if ids != expected {
            let counts = Dictionary(ids.map { ($0, 1) }, uniquingKeysWith: +)
            let twice = counts.filter { $0.value > 1 }.keys.sorted().prefix(5)
            let missing = expected.filter { counts[$0] == nil }.prefix(5)
            let outOfOrder = zip(ids, ids.dropFirst()).first { DeliveryPosition(messageID: $0)!.cursor >= DeliveryPosition(messageID: $1)!.cursor }
            Issue.record("stream holds \(ids.count) messages for \(head) deliveries: twice \(Array(twice)), missing \(Array(missing)), first out of order \(String(describing: outOfOrder))")
        }
        #expect(messages.allSatisfy { $0["subject"] == "herald.com.example.mail.alert" })
    }

    /// Experiment 1: deliveries bridged while the bridge is killed with SIGKILL three times and
    /// restarted: JetStream's stream holds each (partition, cursor) exactly once, in cursor order.
    @Test func aBridgeKilledThreeTimesMidStreamLeavesEachDeliveryOnceInOrder() throws {
        let nats = try NatsServer()
        defer { nats.stop() }
        let server = try TestServer()
        defer { server.stop() }
        let c = try server.client()
        try ServiceTests.setUpAlice(c)
        let logs = nats.directory + "/bridge.log"
        var bridge = try Self.bridge(server, nats, stream: "HERALD", log: logs)
        defer { bridge.kill9() }
        _ = try Self.waitForAck(c, seconds: 20) { _ in (try? ConsumerAdministrationTests.listed(c, "bridge")) != nil }
        let n = Self.deliveries
        let producer = Self.produce(server, count: n, prefix: "k")
        for quarter in 1...3 {
            let reached = try Self.waitForAck(c, seconds: 60) { $0 >= Int64(n * quarter / 4) }
            #expect(reached >= Int64(n * quarter / 4), "the bridge's cursor reached \(reached); its log:\n\(bridge.log.suffix(3000))")
            bridge.kill9()
            bridge = try Self.bridge(server, nats, stream: "HERALD", log: logs)
        }
        while !producer.isFinished { usleep(20_000) }
        let head = try Self.settledHead(c)
        #expect(head == Int64(n))
        #expect(try Self.waitForAck(c, seconds: 60) { $0 >= head } == head, "bridge log:\n\(bridge.log.suffix(3000))")
        #expect(bridge.terminate(), "the bridge stops on SIGTERM")
        let messages = try Self.streamMessages(nats, stream: "HERALD", payload: true)
        Self.checkExactlyOnceInOrder(messages, head: head)
        // The payload is the delivery line as Herald sent it.
        let first = try #require(messages.first?["payload"]?.stringValue)
        let line = try JSONValue.parse(Array(first.utf8))
        #expect(line["op"] == "delivery" && line["cursor"] == 1 && line["notification"] == "k0" && line["kind"] == "alert")
    }

    /// Experiment 2: nats-server (JetStream on disk) killed with SIGKILL and restarted mid-stream:
    /// nothing Herald's cursor passed is missing from the stream, and once the bridge caught up
    /// every delivery is there.
    @Test func natsServerKilledMidStreamLosesNothingHeraldsCursorPassed() throws {
        let nats = try NatsServer()
        defer { nats.stop() }
        let server = try TestServer()
        defer { server.stop() }
        let c = try server.client()
        try ServiceTests.setUpAlice(c)
        let bridge = try Self.bridge(server, nats, stream: "HERALD", log: nats.directory + "/bridge.log")
        defer { bridge.kill9() }
        _ = try Self.waitForAck(c, seconds: 20) { _ in (try? ConsumerAdministrationTests.listed(c, "bridge")) != nil }
        let n = 6_000
        let producer = Self.produce(server, count: n, prefix: "s")
        _ = try Self.waitForAck(c, seconds: 60) { $0 >= Int64(n / 3) }
        nats.kill9()
        let passed = try Self.acked(c)   // what Herald's cursor passed with nats-server down
        usleep(300_000)
        try nats.start()
        while !producer.isFinished { usleep(20_000) }
        let head = try Self.settledHead(c)
        let messages: [JSONValue]
        do {
            // First, before the bridge has caught up: what the cursor passed is already there.
            let early = try Self.streamMessages(nats, stream: "HERALD")
            let ids = Set(early.compactMap { $0["id"]?.stringValue })
            let lost = (1...max(passed, 1)).filter { !ids.contains("0:\($0)") }
            #expect(passed > 0 && lost.isEmpty, "Herald's cursor passed \(passed); missing from the stream: \(lost.prefix(10))")
        }
        #expect(try Self.waitForAck(c, seconds: 60) { $0 >= head } == head, "bridge log:\n\(bridge.log.suffix(3000))")
        messages = try Self.streamMessages(nats, stream: "HERALD")
        Self.checkExactlyOnceInOrder(messages, head: head)
        #expect(bridge.log.contains("bridge session ended"), "the bridge noticed nats-server going away:\n\(bridge.log.suffix(2000))")
    }

    /// A stream that exists with memory storage or too short a duplicate window is refused at
    /// start with a reason (the bridge does not change an operator's stream); the subject names
    /// app and kind; a filtered Herald consumer is not needed.
    @Test func theBridgeRefusesAStreamThatCouldLoseOrDuplicateDeliveries() throws {
        let nats = try NatsServer()
        defer { nats.stop() }
        let server = try TestServer()
        defer { server.stop() }
        // A stream made by the bridge with a 10 s window, then a bridge asking for 600 s.
        let first = try Self.bridge(server, nats, stream: "SHORT", log: nats.directory + "/first.log", extra: ["--duplicate-window", "10"])
        let deadline = Date().addingTimeInterval(20)
        while !first.log.contains("created JetStream stream SHORT") && Date() < deadline { usleep(20_000) }
        #expect(first.terminate())
        let second = try Self.bridge(server, nats, stream: "SHORT", log: nats.directory + "/second.log", extra: ["--duplicate-window", "600"])
        defer { second.kill9() }
        let until = Date().addingTimeInterval(20)
        while !second.log.contains("drops duplicates for 10 s") && Date() < until { usleep(20_000) }
        #expect(second.log.contains("less than the bridge's --duplicate-window 600 s"), "\(second.log.suffix(2000))")
    }
}
