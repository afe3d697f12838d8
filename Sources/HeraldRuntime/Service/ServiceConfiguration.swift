// Everything `herald serve` can be told, in one struct.
import HeraldCore
import HeraldStore

/// How the engine learns the time (SPEC §6).
public enum ClockMode: Sendable, Equatable {
    /// The system's real-time clock (default), read through `ServiceConfiguration.wallClock`.
    case system
    /// Starts at the given instant and moves only by the admin `clock` op (tests, demos).
    case manual(start: Instant)
}

/// The service's settings. Defaults are what a single-machine deployment wants.
public struct ServiceConfiguration: Sendable {
    public var host = "127.0.0.1"
    public var port = 7411
    public var databaseURL: String
    public var clock: ClockMode = .system
    /// Under `.system`, where the wall clock is read (CLOCK_REALTIME). Tests replace it to step
    /// the wall clock; nothing else should.
    public var wallClock: @Sendable () -> Instant = { WheelDriver.systemNow() }
    public var tokens = TokenTable()
    /// The tokens file (`--tokens`): when set, read at start-up (replacing `tokens`) and again on SIGHUP.
    public var tokensFile: String?
    /// TLS on the main listener (`--tls-cert`, `--tls-key`, `--tls-client-ca`); nil serves plaintext.
    public var tls: TLSSettings?
    /// With TLS: an extra plaintext listener, loopback only (`--plain-listen`), for local tools.
    public var plaintextListen: (host: String, port: Int)?
    public var maxConnections = 10_000

    /// Whether a listen host is loopback only (127.0.0.0/8 or `localhost`): `--plain-listen` must
    /// be, and the start-up warnings about dev mode and tokens in clear are for hosts that are not.
    static func isLoopback(_ host: String) -> Bool { host.hasPrefix("127.") || host == "localhost" }
    /// A connection must say hello within this long of being accepted (an absolute deadline).
    public var helloTimeoutMilliseconds: Int64 = 10_000
    /// At the connection limit, a connection without hello for this long gives its slot to a new
    /// client (`evicted_before_hello`).
    public var evictBeforeHelloMilliseconds: Int64 = 1_000
    /// After hello: no complete request for this long closes the connection.
    public var idleTimeoutMilliseconds: Int64 = 300_000
    /// Output the client accepts no byte of for this long closes the connection (it stopped reading, or vanished).
    public var writeTimeoutMilliseconds: Int64 = 60_000
    public var maxLineBytes = LineFramer.defaultMaxLineBytes
    /// Recent deliveries kept in memory for consumers; older ones are read from PostgreSQL.
    public var deliveryRingCapacity = 65_536
    /// …and at most this many bytes of them, whatever their size: 65,536 lines of 3 KB held ~200 MB,
    /// and of the largest summary lines (64 KiB) would have held 4 GiB. Lines of ~1.5 KB (a
    /// summary of a few items) still fill the line bound first.
    public var deliveryRingBytes = 128 << 20
    /// Bytes queued to one consumer before its stream pauses (it resumes from PostgreSQL).
    public var consumerBufferBytes = 4 << 20
    /// Users whose timers are fired in one loop turn when many are due at once (a summary storm):
    /// each slice's deliveries are appended on their own, so consumers see the first ones within
    /// milliseconds instead of after the whole storm commits, and requests keep being served.
    public var timerSliceUsers = 2_000
    /// A slice also ends after this much loop time (checked after every user), so that commits,
    /// consumers and requests are served between slices whatever one user's timers cost; 0: no
    /// time bound. The order of decisions does not depend on where slices end. Short, because a
    /// delivery append by COPY needs the loop twice (to send its rows when PostgreSQL is ready
    /// for them, and to start the next append once it commits): PostgreSQL waits while a slice
    /// runs (with 10 ms slices the first line of a 20,000-job burst comes 70–90 ms after its
    /// instant, with 1 ms 10–20 ms).
    public var timerSliceMicroseconds: Int64 = 1_000
    /// The most delivery rows in one append (one transaction); the next goes when it commits.
    public var deliveryAppendRows = 4_000
    /// While a burst's chained delivery appends are in flight, the interval at which a tiny
    /// asynchronously committed transaction wakes PostgreSQL's WAL writer to flush the rows stored
    /// so far (`HeraldService.startWALNudges`); 0 turns it off. 10 ms lowers a 20,000-job burst's
    /// p99 by about 8%.
    public var walNudgeMilliseconds: Int64 = 10
    /// The store writer's limits (`GroupCommitWriter.Limits`); benchmarks compare its paths with it.
    public var writerLimits = GroupCommitWriter.Limits()
    /// PostgreSQL connections that commit deliveries, beside the one that commits events and
    /// consumers' acks. 0: the events' writer commits them
    /// too (a small batch's deliveries then ride in the next events transaction). 1: a writer of
    /// their own, so two backends store a batch of events and the deliveries decided from the
    /// previous one at the same time. 2 (the most): two, each storing one append at cursors the
    /// service assigns, both at once, committed in cursor order (`GroupCommitWriter.append(
    /// deliveries:after:)`) — a burst of due timers (a summary storm) is stored by two backends.
    /// A delivery is decided only once its events have committed, so the streams never need one transaction.
    public var deliveryWriters = 2
    /// With delivery writers: an append of fewer rows than this, when no append is in flight on a
    /// delivery writer and the events' writer has work in hand, goes to the events' writer instead
    /// and rides in its next transaction (one commit for both). At moderate load that halves the
    /// commits and saves PostgreSQL and the loop their per-transaction costs; a larger batch (load
    /// near saturation, a burst of timers) still goes to the delivery writers, whose backends then
    /// work beside the events' one. 0: deliveries never ride.
    public var deliveriesRideBelowRows = 256
    public var serverName = HeraldVersion.serverName
    /// This instance's name among those serving the database (`--instance`): the owner its
    /// partitions' leases name. nil: the host name and the port.
    public var instanceName: String?
    /// Where clients reach this instance (`--advertise HOST:PORT`), published in the leases and
    /// `hello`'s routes. nil: the listening address.
    public var advertise: String?
    /// How long a partition's lease lasts without renewal (`--lease-ttl`), in milliseconds.
    public var leaseTTLMilliseconds: Int64 = 5_000
    /// The partition this service serves (SPEC §9). A database of one partition: 0.
    public var partition = 0
    /// The epoch of the partition's lease, when the instance took it before starting this service
    /// (a cluster member: `ClusterMember`). nil: the service takes the lease itself, whoever held
    /// it — the single-instance `herald serve`, which the instance lock keeps alone on the database.
    public var leaseEpoch: Int64?
    /// Handle SIGTERM/SIGINT (one service per process may; tests run several and stop them with `requestShutdown`).
    public var handleSignals = true
    /// Reload the tokens file on SIGHUP; nil follows `handleSignals`.
    public var handleHangup: Bool?
    /// Serve even when fsync or synchronous_commit is off (acknowledged events may be lost in a crash).
    public var allowUnsafeDurability = false
    /// Write a snapshot of every user's state after this many events were folded since the last
    /// one (start-up's fold counts); nil never writes one (docs/restart.md).
    public var snapshotEveryEvents: Int? = 250_000
    /// With many users, the interval is at least this many events per user known: a capture's
    /// cost is the users' (~0.3 µs of loop time each at a million, docs/restart.md), so a fixed
    /// interval of events made it ~1.2 µs an event at 1M users. With 1, a capture costs at most
    /// ~0.3 µs an event amortized at any size, and a restart folds at most max(snapshotEveryEvents,
    /// users) events after the snapshot. 0: `snapshotEveryEvents` alone.
    public var snapshotEventsPerUser = 1
    /// At a clean shutdown (SIGTERM, `requestShutdown`), after the drain, write a final snapshot
    /// when events were folded since the last one, so the next start folds nothing (needs
    /// `snapshotEveryEvents`). Given up after `shutdownSnapshotMilliseconds` (an unfinished snapshot
    /// is ignored by the next start, which folds from the previous one).
    public var snapshotAtShutdown = true
    /// The rules version this service decides new events and timers by (recorded in
    /// `rules_versions` at start-up when the log's latest differs). Always this build's own
    /// (`Engine.currentRulesVersion`) in `herald serve`; a test sets an older one to write a log
    /// as an older build did, then upgrades it.
    public var rulesVersion = Engine.currentRulesVersion
    /// How long start-up waits for another `herald serve` on the same database to let go of
    /// the instance lock before refusing to start (`InstanceLock`): a process just killed may
    /// hold it until its PostgreSQL backend notices.
    public var instanceLockWaitMilliseconds = 5_000
    public var shutdownSnapshotMilliseconds: Int64 = 60_000
    /// Start from the latest complete snapshot (false: fold the whole log, as before snapshots).
    public var restoreFromSnapshots = true
    /// Seal each user's content under their key (docs/erasure.md). Off only in the
    /// ingest benchmark's comparison run (`herald bench ingest --unsealed`): content stored in
    /// clear cannot be erased.
    public var sealsContent = true

    /// NEGATIVE CONTROL FOR TESTS ONLY — never set it in production. Acknowledges every
    /// state-changing request as soon as it is admitted, before its append is even sent to
    /// PostgreSQL (the reply carries `"seq":0`: no seq is known before COMMIT), so a crash or an
    /// outage loses acknowledged events. It exists so the reliability experiments can show that
    /// their history checker sees loss. `herald serve` offers it only as the hidden flag
    /// `--unsafe-acknowledge-before-commit-for-testing`.
    public var acknowledgeBeforeCommitForTesting = false

    /// FAULT INJECTION FOR TESTS ONLY: handed to the store writer (see
    /// `GroupCommitWriter.commitFlushedForTesting`); called once a transaction's COMMIT has been
    /// flushed to the socket, before its reply is read. Returning true cuts the connection there.
    public var commitFlushedForTesting: (@Sendable (_ socket: Int32, _ eventRows: Int) -> Bool)?

    public init(databaseURL: String) { self.databaseURL = databaseURL }
}
