// `herald bench bridge`: deliveries per second through `herald bridge nats` into JetStream, beside a plain publisher of the same messages.
import ArgumentParser
import Foundation
import Glibc
import HeraldBridge
import HeraldCommandLine
import HeraldCore
import HeraldRuntime
import HeraldStore
import HeraldTestSupport

struct BridgeBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bridge",
        abstract: "Deliveries per second through herald bridge nats into JetStream, beside the C client's own publish loop.",
        discussion: """
            Builds a log of N deliveries in an in-process herald serve, reads their lines, then, --runs times \
            interleaved: the baseline publishes the same lines with the same Nats-Msg-Id headers straight to a \
            fresh JetStream stream through NATS's C client (asynchronous, the same window, every publish \
            acknowledged), timed until the last acknowledgement; the bridge (`herald bridge nats`, the herald \
            beside herald-bench, as a child process) streams the log from cursor 0 into another fresh stream, \
            timed from its start until Herald's cursor for it reaches the head. Starts nats-server (-js, a \
            temporary folder) unless --nats-url is given. Goal: the bridge at ≥ 0.7× the baseline.
            """)

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var fresh: FreshDatabaseOption
    @Option(help: "Deliveries in the log.") var deliveries = 100_000
    @Option(help: "Interleaved rounds (the median is reported).") var runs = 3
    @Option(help: "Publishes awaiting confirmation at once, for both.") var window = 1_024
    @Option(help: "An existing NATS server with JetStream (default: start nats-server).") var natsURL: String?
    @Flag(help: "Print JSON instead of a table.") var json = false

    func run() throws {
        try reportingErrors {
            let location = try database.resolve(fresh: fresh)
            defer { location.close() }
            let url = try scratchDatabase(location, name: "herald_bench_bridge")
            var natsProcess: Process?
            var natsDirectory: String?
            let nats: String
            if let natsURL {
                nats = natsURL
            } else {
                let (process, directory, address) = try Self.startNatsServer()
                natsProcess = process; natsDirectory = directory; nats = address
            }
            defer {
                if let natsProcess { kill(natsProcess.processIdentifier, SIGKILL); natsProcess.waitUntilExit() }
                if let natsDirectory { try? FileManager.default.removeItem(atPath: natsDirectory) }
            }
            let herald = URL(fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0])
                .deletingLastPathComponent().appendingPathComponent("herald").path
            guard FileManager.default.isExecutableFile(atPath: herald) else {
                throw StoreError.configuration("herald was not found beside herald-bench (\(herald)); build it: swift build -c release --product herald")
            }
            var plain: [Double] = [], bridged: [Double] = []
            try withInProcessService(url: url, configure: {
                $0.clock = .manual(start: Instant(rfc3339: "2026-11-23T06:00:00Z")!)
                $0.deliveryRingCapacity = max(deliveries + 1, 65_536)
            }) { port in
                let head = try ConsumerBench.load(port: port, deliveries: deliveries)
                let lines = try Self.readLines(port: port, count: head)
                for round in 0..<runs {
                    let p = try Self.plainPublish(url: nats, lines: lines, stream: "PLAIN\(round)", prefix: "plain\(round)", window: window)
                    plain.append(p)
                    Log.info("bridge bench: plain publisher \(Int(p)) messages/s")
                    let b = try Self.bridgeRun(herald: herald, port: port, nats: nats, head: Int64(head), round: round, window: window)
                    bridged.append(b)
                    Log.info("bridge bench: herald bridge nats \(Int(b)) deliveries/s")
                }
            }
            func median(_ v: [Double]) -> Double { v.sorted()[v.count / 2] }
            let ratio = median(bridged) / median(plain)
            if json {
                print(JSONValue.object([
                    "deliveries": .int(Int64(deliveries)), "window": .int(Int64(window)),
                    "plainMessagesPerSecond": .int(Int64(median(plain))), "bridgeDeliveriesPerSecond": .int(Int64(median(bridged))),
                    "ratio": .double((ratio * 100).rounded() / 100),
                ]).canonicalString)
            } else {
                print("bridge: \(deliveries) deliveries into JetStream (file storage), \(window) publishes in flight, median of \(runs)")
                print("  baseline: the C client's async publish loop, same lines and ids   \(Int(median(plain))) messages/s   (\(plain.map { String(Int($0)) }.joined(separator: ", ")))")
                print("  herald bridge nats, Herald's cursor acked after JetStream's ack   \(Int(median(bridged))) deliveries/s   (\(bridged.map { String(Int($0)) }.joined(separator: ", ")))   ratio "
                      + String(format: "%.2f×", ratio) + " (goal ≥ 0.7×)")
            }
        }
    }

    static func startNatsServer() throws -> (Process, String, String) {
        guard let binary = ["/usr/sbin/nats-server", "/usr/bin/nats-server", "/usr/local/bin/nats-server"].first(where: {
            FileManager.default.isExecutableFile(atPath: $0)
        }) else {
            throw StoreError.configuration("nats-server is not installed (scripts/bootstrap installs Debian's); or give --nats-url")
        }
        let directory = FileManager.default.temporaryDirectory.path + "/herald-bench-nats-\(getpid())"
        try? FileManager.default.removeItem(atPath: directory)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let port = LocalCluster.freePort()
        let p = Process()
        p.executableURL = URL(fileURLWithPath: binary)
        p.arguments = ["-js", "-sd", directory + "/js", "-a", "127.0.0.1", "-p", String(port)]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        let address = "nats://127.0.0.1:\(port)"
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if (try? NatsJetStream(url: address, maxPending: 1, ackWaitMilliseconds: 1_000)) != nil { return (p, directory, address) }
            usleep(50_000)
        }
        throw StoreError.configuration("nats-server did not answer on \(address) within 20 s")
    }

    /// The log's delivery lines, read by an ephemeral stream from cursor 0.
    static func readLines(port: Int, count: Int) throws -> [[UInt8]] {
        let c = try WireClient(port: port)
        defer { c.close() }
        _ = try c.request(#"{"op":"hello","token":""}"#)
        _ = try c.request(#"{"op":"subscribe","ephemeral":true,"from":0}"#)
        var lines: [[UInt8]] = []
        lines.reserveCapacity(count)
        while lines.count < count {
            guard let line = try c.readLine(timeoutMilliseconds: 30_000) else { throw StoreError.configuration("the log's lines stopped at \(lines.count)") }
            lines.append(line)
        }
        return lines
    }

    /// Publishes every line with its delivery's id to a fresh stream, `window` at a time; messages per second.
    static func plainPublish(url: String, lines: [[UInt8]], stream: String, prefix: String, window: Int) throws -> Double {
        let nats = try NatsJetStream(url: url, maxPending: window, ackWaitMilliseconds: 10_000)
        defer { nats.close() }
        _ = try nats.ensureStream(stream, subject: prefix + ".>", duplicateWindowSeconds: 120)
        let subject = prefix + ".com.example.mail.alert"
        let t0 = Date()
        var sent = 0, confirmed = 0
        while confirmed < lines.count {
            while sent < lines.count && sent - confirmed < window {
                try lines[sent].withUnsafeBytes { try nats.publish(subject: subject, payload: $0, id: "0:\(sent + 1)") }
                sent += 1
            }
            let (ids, failure) = nats.confirmations(waitingUpTo: 20)
            if let failure { throw NatsFailure(failure) }
            confirmed += ids.count
        }
        return Double(lines.count) / Date().timeIntervalSince(t0)
    }

    /// Runs `herald bridge nats` from cursor 0 into a fresh stream until Herald's cursor for it is at `head`; deliveries per second.
    static func bridgeRun(herald: String, port: Int, nats: String, head: Int64, round: Int, window: Int) throws -> Double {
        let name = "bench-bridge-\(round)"
        let control = try WireClient(port: port)
        defer { control.close() }
        _ = try control.request(#"{"op":"hello","token":""}"#)
        do {
            // The consumer made durable at cursor 0, so the bridge starts there.
            let c = try WireClient(port: port)
            _ = try c.request(#"{"op":"hello","token":""}"#)
            _ = try c.request(#"{"op":"subscribe","consumer":"\#(name)","from":0}"#)
            c.close()
        }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: herald)
        p.arguments = ["bridge", "nats", "--herald", "127.0.0.1:\(port)", "--consumer", name, "--url", nats,
                       "--stream", "BRIDGE\(round)", "--subject-prefix", "bridge\(round)", "--window", String(window)]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        let t0 = Date()
        try p.run()
        defer { kill(p.processIdentifier, SIGTERM); p.waitUntilExit() }
        while true {
            let r = try control.request(#"{"op":"consumers"}"#)
            let acked = r["consumers"]?.arrayValue?.first { $0["consumer"]?.stringValue == name }?["partitions"]?.arrayValue?.first?["acked"]?.intValue ?? 0
            if acked >= head { break }
            guard p.isRunning, Date().timeIntervalSince(t0) < 600 else { throw StoreError.configuration("the bridge stopped or stalled at cursor \(acked) of \(head)") }
            usleep(5_000)
        }
        return Double(head) / Date().timeIntervalSince(t0)
    }
}
