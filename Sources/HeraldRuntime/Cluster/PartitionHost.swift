// One partition's service inside a cluster member: a HeraldService on a thread of its own, reached on loopback.
import Foundation
import HeraldCore
import Prometheus

/// Runs the service of one partition (a `HeraldService` serving `configuration.partition` at the
/// lease epoch the member took) on its own thread and event loop, listening on loopback for the
/// member's router only (the internal token). Starting restores the partition from its snapshot
/// and log; `started` and `stopped` are called on the member's loop.
final class PartitionHost: @unchecked Sendable {
    // Why @unchecked Sendable: `service` is set on the host's thread before `started` is posted,
    // and read by the member only after; `port` likewise. `requestShutdown` is thread-safe.
    let partition: Int
    let epoch: Int64
    private(set) var port = 0
    private var service: HeraldService?
    private var thread: Thread?
    private let done = DispatchSemaphore(value: 0)
    private(set) var startedAt = 0.0

    init(partition: Int, epoch: Int64) {
        self.partition = partition
        self.epoch = epoch
    }

    /// Starts the service on a new thread. `started(port)` or `failed(error)`, then `stopped`,
    /// are called through `post` (onto the member's loop).
    /// `metrics`: the member's registry and request durations (`--http`), which the service
    /// publishes into every second from its loop.
    func start(_ configuration: ServiceConfiguration, metrics: (registry: PrometheusCollectorRegistry, durations: MemberRequestDurations)?,
               log: @escaping (String) -> Void,
               post: @escaping (@escaping () -> Void) -> Void,
               started: @escaping (Int) -> Void, failed: @escaping (String) -> Void, stopped: @escaping () -> Void) {
        let partition = self.partition
        // Why unchecked: `log` and `post` are thread-safe (the member's log and its locked queue);
        // the other closures run on the member's loop, through `post`.
        nonisolated(unsafe) let callbacks = (log: log, post: post, started: started, failed: failed, stopped: stopped)
        let metrics = metrics
        let thread = Thread { [self] in
            let service = HeraldService(configuration: configuration) { callbacks.log("partition \(partition): \($0)") }
            do {
                let port = try service.start()
                self.service = service
                self.port = port
                let observability = metrics.map { ServiceObservability(memberPartition: service, registry: $0.registry) }
                if let observability, let durations = metrics?.durations {
                    observability.startPublishing(everyMilliseconds: 1_000, durations: durations)
                }
                callbacks.post { callbacks.started(port) }
                service.run()
                observability?.stop()
                // Its listener closes with it: a connect from then on is refused, not left in a backlog.
                self.service = nil
            } catch {
                let why = "\(error)"
                callbacks.post { callbacks.failed(why) }
            }
            self.done.signal()
            callbacks.post { callbacks.stopped() }
        }
        thread.name = "herald-partition-\(partition)"
        thread.stackSize = 8 << 20
        self.thread = thread
        thread.start()
    }

    /// A graceful stop: goodbye to the router's links, in-flight commits answered, a final
    /// snapshot, the lease released.
    func stop() { service?.requestShutdown() }

    /// Waits for the service's thread to end (at most `seconds`).
    func wait(seconds: Double) -> Bool { done.wait(timeout: .now() + seconds) == .success }
}
