// `herald bench client`: the Swift client's pipelined acked submits on one connection, beside ingest's raw-socket producer.
import ArgumentParser
import Dispatch
import Foundation
import HeraldClient
import HeraldCommandLine
import HeraldTestSupport
import Synchronization

struct ClientBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "client",
        abstract: "Pipelined acked submits per second on one connection: the HeraldClient library beside ingest's own producer.",
        discussion: """
            Both send the same ~300-byte submits to an in-process herald serve, one connection each, with the \
            same window of unanswered requests, in alternating rounds (raw, client, raw, client, …) on one \
            database. The baseline is `herald bench ingest`'s producer with one connection: every line encoded \
            before the clock starts, written in window-sized writes, acks counted by scanning bytes. The client \
            builds each `Submit`, encodes it, and returns each ack as a typed `Ack` through `PendingAck`.
            """)

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var fresh: FreshDatabaseOption
    @Option(help: "Submits per round.") var events = 50_000
    @Option(help: "Rounds of each (alternating).") var rounds = 3
    @Option(help: "Unanswered requests per connection.") var window = 1024
    @Option(help: "Distinct users (each authorized first).") var users = 1_000

    func run() throws {
        try reportingErrors {
            let location = try database.resolve(fresh: fresh)
            defer { location.close() }
            let url = try scratchDatabase(location, name: "herald_bench_client")
            var raw: [Double] = [], client: [Double] = []
            // CPU of this process per submit (the in-process herald serve and the producer together).
            var rawCPU: [Double] = [], clientCPU: [Double] = []
            try withInProcessService(url: url) { port in
                var load = IngestLoad()
                load.producers = 1; load.window = window; load.users = users; load.events = events
                Log.info("authorizing \(users) users")
                try load.prepare(port: port)
                for round in 0..<rounds {
                    load.idPrefix = "raw\(round)"
                    var cpu = BenchMachine.cpuSeconds()
                    let r = try load.run(port: port)
                    rawCPU.append((BenchMachine.cpuSeconds() - cpu) / Double(events) * 1e6)
                    raw.append(r.acksPerSecond)
                    Log.info("round \(round + 1): raw producer \(Int(r.acksPerSecond)) acks/s")
                    cpu = BenchMachine.cpuSeconds()
                    let c = try Self.clientRound(port: port, load: load, prefix: "client\(round)", window: window)
                    clientCPU.append((BenchMachine.cpuSeconds() - cpu) / Double(events) * 1e6)
                    client.append(c)
                    Log.info("round \(round + 1): HeraldClient \(Int(c)) acks/s")
                }
            }
            func median(_ xs: [Double]) -> Double { xs.sorted()[xs.count / 2] }
            let ratio = median(client) / median(raw)
            print("one connection, \(events) submits a round, window \(window), \(rounds) rounds each (alternating)")
            print("  ingest's raw-socket producer   " + raw.map { String(Int($0)) }.joined(separator: " / ") + " → median \(Int(median(raw))) acks/s")
            print("  HeraldClient (Swift, async)    " + client.map { String(Int($0)) }.joined(separator: " / ") + " → median \(Int(median(client))) acks/s")
            print(String(format: "  ratio %.2f (target ≥ 0.80)", ratio))
            print(String(format: "  CPU of this process per submit (herald serve and the producer): raw %.1f µs, client %.1f µs (medians)",
                         median(rawCPU), median(clientCPU)))
        }
    }

    /// One round of the client: `events` submits sent from one task, every ack awaited.
    static func clientRound(port: Int, load: IngestLoad, prefix: String, window: Int) throws -> Double {
        let outcome = Mutex<Result<Double, HeraldError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        let submits = (0..<load.events).map { i in
            Submit(id: "\(prefix)-\(i)", app: load.app, user: "user-\(i % load.users)", interruptionLevel: .active, title: "Order shipped",
                   body: "Your order #\(i) has shipped and will arrive on Tuesday between 9 and 12. Track it in the app.",
                   hiddenPreviewsBodyPlaceholder: "Order update", threadId: "orders")
        }
        Task {
            defer { done.signal() }
            do throws(HeraldError) {
                let herald = try await HeraldProducer.connect(port: port, window: window)
                let started = ContinuousClock.now
                var pending: [PendingAck] = []
                pending.reserveCapacity(submits.count)
                for s in submits { pending.append(await herald.send(s)) }
                for p in pending { _ = try await p.value }
                let elapsed = ContinuousClock.now - started
                await herald.close()
                let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
                outcome.withLock { $0 = .success(Double(submits.count) / seconds) }
            } catch {
                outcome.withLock { $0 = .failure(error) }
            }
        }
        done.wait()
        return try outcome.withLock { $0! }.get()
    }
}
