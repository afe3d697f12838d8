// The service writers' knobs: `herald serve` and the benches that run a service share them.
import ArgumentParser
import HeraldRuntime
import HeraldStore

/// The defaults the help texts quote, read from where they are set.
private let serviceDefaults = ServiceConfiguration(databaseURL: "")

/// How the service commits: `herald serve` offers them to operators, and `bench ingest`,
/// `latency`, `storm` and `peer` for A/B runs of the same build. Unset, each is the service's
/// default (`ServiceConfiguration`, `GroupCommitWriter.Limits`).
public struct WriterOptions: ParsableArguments, Sendable {
    public init() {}

    @Option(help: "PostgreSQL connections that commit deliveries beside the events' one: 0 (the events' writer commits them too), 1, or 2 (default: the service's, \(serviceDefaults.deliveryWriters); two backends store a burst of deliveries at once).")
    public var deliveryWriters: Int?
    @Option(help: "With delivery writers, an append of fewer deliveries than this rides in the events' writer's next transaction while it is busy: one commit for both at moderate load (default: the service's, \(serviceDefaults.deliveriesRideBelowRows); 0: never).")
    public var deliveriesRideBelow: Int?
    @Option(help: "A committed transaction of at most this many events completes before the next one is sent, so the deliveries decided from it ride in that next one (default: the writer's, \(GroupCommitWriter.Limits().completeFirstUpToEvents); 0: always send first).")
    public var completeFirstUpTo: Int?
    @Option(help: "While a burst's deliveries are being stored, wake PostgreSQL's WAL writer this often, so each append's COMMIT flushes less (default: the service's, \(serviceDefaults.walNudgeMilliseconds) ms; 0: never).")
    public var walNudgeMilliseconds: Int64?

    public func validate() throws {
        if let deliveryWriters, !(0...2).contains(deliveryWriters) {
            throw ValidationError("--delivery-writers must be 0, 1 or 2")
        }
        if let deliveriesRideBelow, deliveriesRideBelow < 0 {
            throw ValidationError("--deliveries-ride-below must be 0 (never) or a number of rows")
        }
        if let completeFirstUpTo, completeFirstUpTo < 0 {
            throw ValidationError("--complete-first-up-to must be 0 (always send first) or a number of events")
        }
        if let walNudgeMilliseconds, walNudgeMilliseconds < 0 {
            throw ValidationError("--wal-nudge-milliseconds must be 0 (never) or a number of milliseconds")
        }
    }

    public func apply(to configuration: inout ServiceConfiguration) {
        if let completeFirstUpTo { configuration.writerLimits.completeFirstUpToEvents = completeFirstUpTo }
        if let deliveryWriters { configuration.deliveryWriters = deliveryWriters }
        if let deliveriesRideBelow { configuration.deliveriesRideBelowRows = deliveriesRideBelow }
        if let walNudgeMilliseconds { configuration.walNudgeMilliseconds = walNudgeMilliseconds }
    }
}
