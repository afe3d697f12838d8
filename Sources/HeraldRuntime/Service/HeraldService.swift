// The service: wires connections, the engine, the timing wheel and the store on one loop.
import CLibEvent
import DequeModule
import Glibc
import HeraldCore
import HeraldStore
import Logging

/// One user's live state: the engine's fold, its delivery ordinal and its wake-up in the wheel.
struct UserRecord {
    var state: UserState
    var index: UInt64
    var deliveryCount: Int64 = 0
    var wakeAt: Instant?
    var wakeHandle: TimerHandle?
}

/// `herald serve`. Order for every request: admit (pure checks) → append to PostgreSQL →
/// on COMMIT: fold into the user's state (the engine decides), acknowledge, append the
/// deliveries → on their COMMIT: stream them to consumers. Nothing is acknowledged before
/// its event is committed; deliveries are re-derivable from events, so a crash between the
/// two commits is repaired at start-up by re-deriving them.
public final class HeraldService: ConnectionDelegate {
    public let configuration: ServiceConfiguration
    public let loop: EventLoop
    /// Decides by the rules versions the log records: `restore` adopts them before serving
    /// (`RulesBook.adopt`). A `let`, so the hot path borrows it (a `var` would be copied every call).
    let engine = Engine()
    var apps = AppRegistry()
    /// Every user's record, indexed by the user's ordinal (also its payload in the wheel).
    var users: [UserRecord] = []
    /// A user's ordinal in `users`: looked up once per event.
    /// Each user's ordinal (its index in `users`) by id; `ordinal(of:)` reads it.
    var userOrdinals = OrdinalIndex()
    /// Users whose timers the wheel reported due, fired a slice per loop turn (`fireDueSlice`),
    /// and who waits for them (the `clock` op's reply).
    var dueUsers = DueUsers()
    /// The sink each delivery's stored body is written into.
    let rowScratch = ScratchSink()
    /// Each distinct trace's stored bytes, shared by the rows that have it.
    var traceBytes = TraceBytesCache()
    /// The deliveries of the decision being taken (`Engine.apply(_:to:apps:appendingTo:)`): one
    /// buffer reused for every event and timer, emptied by `take`.
    var decided: [Delivery] = []
    /// Consumers' batches are written here, then sent as one array (`appendLine`).
    let lineScratch = ScratchSink()
    /// Acknowledgements are written here (`WireReply.appended(…using:)`).
    let replyScratch = ScratchSink()
    var timers: WheelDriver!
    /// Snapshots and lean-content loading (HeraldService+Snapshot, +Restore; docs/restart.md).
    let restart = RestartState()
    /// Content keys: sealing rows, opening stored ones, erasure (HeraldService+Erasure).
    let contentKeys = ContentKeys()
    /// A zero-delay event that runs `fireTimers` once per loop turn (see `fireTimersSoon`).
    var timerCheck: LoopEvent?
    let store: StoreLink
    /// The deliveries' own writers (`ServiceConfiguration.deliveryWriters`); none: `store` commits them.
    let deliveryStores: [StoreLink]
    /// Where deliveries are committed.
    let deliveryLinks: [StoreLink]
    let reader: AsyncReader
    /// The lease renewals' own connection: a renewal waits on the partition's row while an append
    /// transaction holds it, which must not hold up the reader's consumer reads.
    let leaseConnection: AsyncReader
    var listener: Listener?
    /// With TLS: the optional loopback plaintext listener.
    var plaintextListener: Listener?
    /// The tokens table and TLS context in force, as last (re)loaded.
    var credentials: Credentials
    var reloadRequest: LoopTrigger?
    /// The client connections, their limit and who gives up a slot before hello.
    var connections = ConnectionTable()
    /// Frees closed connections one loop turn after they closed (`ConnectionTable.freeClosed`).
    var reaper: LoopEvent?
    var signals: [LoopEvent] = []
    /// Serving, or how far a graceful stop has come (`beginShutdown`, `shutdownStep`).
    var lifecycle = ServiceLifecycle.serving
    var shutdownTimer: LoopEvent?
    var stopRequest: LoopTrigger?

    /// The database's partitions (read at start-up) and the lease of the one this instance serves.
    var partitioning = Partitioning.single
    /// The partition this service serves: its events, deliveries, snapshots and consumer cursors.
    var partition: Int { configuration.partition }
    var lease: LeaseStateMachine
    var leaseTimer: LoopEvent?
    /// Lease renewals that committed, and those that could not reach PostgreSQL (`/metrics`).
    var leaseRenewals = 0
    var leaseRenewalFailures = 0
    /// The lease was taken by another instance: this service only stops now.
    var fencedOut = false

    /// Engine time: the manual clock, or the wall clock never allowed to go backwards.
    var engineClock: EngineClock
    /// A reconnected events writer could not take the instance lock back (`retakeInstanceLock`).
    var instanceLockMissing = false
    /// The latest engine time start-up's fold saw (the rules take-over is no earlier).
    var latestRestoredTime = Instant.epoch
    /// Event appends sent and not yet answered: their times, idempotency keys and lost outcomes.
    var appendsInFlight = AppendsInFlight()
    /// The highest seq folded into memory: every event up to it is in the users' state.
    var lastFoldedSeq: Int64 = 0
    var retryReconcile: LoopEvent?
    /// Decided deliveries on their way to PostgreSQL: unsent rows, appends in flight, waiters.
    var deliveryAppends: DeliveryAppends
    /// Delivery appends handed to the writers whose outcome is not handled yet: at most
    /// `maxDeliveryAppends`, so the next batch is queued when one commits and a writer stores it
    /// while this loop handles the committed one (with two delivery writers, one each, at once).
    var deliveryAppendsInFlight: Int { deliveryAppends.inFlight }
    static let maxDeliveryAppends = 2
    /// A burst's last rows, when more than this many, are shared between the delivery writers
    /// so they finish together (`burstTailShare`); no share leaves this many or fewer behind.
    static let splitBurstTailAbove = 512
    /// WAL writer nudges during bursts (`startWALNudges`): the timer (whether a nudge is in
    /// flight is `phases.walNudgeInFlight`, shown by `stats`).
    var walNudgeTimer: LoopEvent?
    /// How far firing may run ahead of the appends: timers fire while fewer than this many
    /// appends' worth of rows (`deliveryAppendRows` each) wait unsent. With 2, a 20,000-job peer
    /// burst stopped firing for ~17 ms while one writer stored a large append and the other waited
    /// for it to commit: one core idle. With 5 firing ends early and the writers have the machine
    /// to themselves (`herald bench peer`, 10 pairs: p99 median 166 → 153 ms). It still bounds
    /// what piles up while PostgreSQL is slow or away (20,000 rows at the default 4,000).
    static let unsentAppendsAhead = 5
    var deliveriesInFlight: Bool { deliveryAppendsInFlight > 0 }

    /// Committed deliveries kept for consumers, and the delivery head.
    var ring: DeliveryRing
    /// The newest committed delivery's cursor.
    var deliveryHead: Int64 { ring.head }
    /// The subscribed consumers' groups and streams, by name.
    var consumers = ConsumerRegistry()
    /// Numbers the group members that subscribe here directly (not through a router).
    var memberSerial: UInt64 = 0
    /// Where fired timers' deliveries spend their time (reported by `stats`).
    var phases = FiringPhases()
    /// Tests only: called on the loop right after a consumer's catch-up read is sent, to wake the
    /// stream as a drain callback or a commit could while the read is in flight (`ConsumerCatchUpTests`).
    var catchUpReadSent: ((ConsumerStream) -> Void)?

    public var log: (String) -> Void
    /// Set by `init(configuration:logger:)`: connections' lines go to it as records with fields.
    public internal(set) var logger: Logger?

    /// How closures and connections refer to the service: not `weak`, which would give it a
    /// side table and every retain of it the slow path (see `Unretained`). Cleared in `deinit`.
    let unretained = Unretained<HeraldService>()
    let asConnectionDelegate = ConnectionDelegateRef()

    /// Replies by op and code, and their durations (`/metrics`).
    let requestMetrics = RequestMetrics()
    // Counters for `stats`.
    var eventsCommitted = 0
    var deliveriesCommitted = 0
    var requestsRejected = 0

    public init(configuration: ServiceConfiguration, log: @escaping (String) -> Void) {
        self.configuration = configuration
        self.log = log
        self.credentials = Credentials(tokens: configuration.tokens)
        self.loop = EventLoop()
        self.store = StoreLink(loop: loop, url: configuration.databaseURL)
        self.deliveryStores = (0..<min(max(configuration.deliveryWriters, 0), 2)).map { [loop] _ in
            StoreLink(loop: loop, url: configuration.databaseURL)
        }
        self.deliveryLinks = deliveryStores.isEmpty ? [store] : deliveryStores
        self.deliveryAppends = DeliveryAppends(links: deliveryLinks.count)
        self.reader = AsyncReader(loop: loop, url: configuration.databaseURL)
        self.leaseConnection = AsyncReader(loop: loop, url: configuration.databaseURL)
        self.ring = DeliveryRing(capacity: configuration.deliveryRingCapacity, maxBytes: configuration.deliveryRingBytes)
        self.lease = LeaseStateMachine(ttlMilliseconds: max(configuration.leaseTTLMilliseconds, 100))
        if case .manual(let start) = configuration.clock { engineClock = EngineClock(manual: start) } else { engineClock = EngineClock() }
        reader.log = log
        leaseConnection.log = log
        for link in [store] + deliveryStores {
            link.log = log
            link.commitFlushedForTesting = configuration.commitFlushedForTesting
            link.limits = configuration.writerLimits
        }
        // A committed batch's deliveries are appended once its requests have all completed: in
        // one batch, and (small transactions) in the transaction sent next.
        store.afterCompletions = { [unretained] in unretained.object?.flushDeliveries() }
        let systemClock = engineClock.manual == nil
        let wallClock = configuration.wallClock
        self.timers = WheelDriver(loop: loop, start: .epoch, systemClock: systemClock) { [unowned self] in self.engineClock.manual ?? wallClock() }
        timers.onTimer = { [unretained] in unretained.object?.fireTimers() }
        timerCheck = loop.timer { [unretained] in unretained.object?.fireTimers() }
        unretained.object = self
        asConnectionDelegate.delegate = self
    }

    deinit {
        unretained.object = nil
        asConnectionDelegate.delegate = nil
    }

    /// The engine's idea of now.
    func now() -> Instant {
        if let manual = engineClock.manual { return manual }
        return engineClock.read(wall: configuration.wallClock(), monotonic: ClientConnection.monotonicMilliseconds(), log: log)
    }

    /// Connects, migrates, rebuilds state from the log, then listens. Returns the bound port.
    @discardableResult
    public func start() throws -> Int {
        // Configuration first: a bad tokens file or certificate fails before any database work.
        try loadTokensAtStart()
        if let settings = configuration.tls {
            credentials.certificateLoaded(try TLSContext(settings))
        }
        if let plain = configuration.plaintextListen {
            guard configuration.tls != nil else {
                throw ServiceError.configuration("--plain-listen is only for a plaintext port beside TLS; without --tls-cert, --listen already serves plaintext.")
            }
            guard ServiceConfiguration.isLoopback(plain.host) else {
                throw ServiceError.configuration("--plain-listen \(plain.host):\(plain.port) is not a loopback address; "
                    + "plaintext beside TLS is served on loopback only (e.g. 127.0.0.1:7412).")
            }
        }
        let conn = try PGConnection.connect(configuration.databaseURL)
        try DurabilityCheck.require(conn, allowUnsafe: configuration.allowUnsafeDurability, log: log)
        // One service per database: the lock lives on this connection, the events writer's from
        // here on (taken again whenever the writer reconnects, see `retakeInstanceLock`).
        if configuration.leaseEpoch == nil {
            try InstanceLock.take(conn, waitMilliseconds: configuration.instanceLockWaitMilliseconds)
        }
        try Migrator.migrate(conn) { self.log($0) }
        try takePartitions(conn)
        try restore(from: conn)
        try store.adopt(conn)
        for link in deliveryStores { try link.adopt(PGConnection.connect(configuration.databaseURL)) }
        try reader.adopt(PGConnection.connect(configuration.databaseURL))
        try leaseConnection.adopt(PGConnection.connect(configuration.databaseURL))
        store.onReady = { [unretained] in
            unretained.object?.reconcileUnknownCommits()
            unretained.object?.flushDeliveries()
        }
        for link in deliveryStores { link.onReady = { [unretained] in unretained.object?.flushDeliveries() } }
        if configuration.leaseEpoch == nil {
            store.prepareReconnected = { [unretained] connection in unretained.object?.retakeInstanceLock(connection) }
        }
        // The context as last (re)loaded: SIGHUP may replace it (`reloadCertificate`).
        limitConnectionsToFileLimit()
        let acceptError: (String) -> Void = { [unretained] message in unretained.object?.log("warning: \(message)") }
        let listener = try Listener(loop: loop, host: configuration.host, port: configuration.port, onAccept: { [unretained] fd in
            guard let service = unretained.object else { return }
            service.accept(fd, tls: service.credentials.tls)
        }, onAcceptError: acceptError)
        self.listener = listener
        if let plain = configuration.plaintextListen {
            plaintextListener = try Listener(loop: loop, host: plain.host, port: plain.port, flag: "--plain-listen", onAccept: { [unretained] fd in
                unretained.object?.accept(fd, tls: nil)
            }, onAcceptError: acceptError)
        }
        try takeOverRules()
        reaper = loop.timer { [unretained] in unretained.object?.connections.freeClosed() }
        stopRequest = loop.trigger { [unretained] in unretained.object?.beginShutdown() }
        for sig in configuration.handleSignals ? [SIGTERM, SIGINT] : [] {
            let s = loop.signal(sig) { [unretained] in unretained.object?.beginShutdown() }
            s.arm()
            signals.append(s)
        }
        reloadRequest = loop.trigger { [unretained] in unretained.object?.reloadOnHangup() }
        if configuration.handleHangup ?? configuration.handleSignals {
            let s = loop.signal(SIGHUP) { [unretained] in unretained.object?.reloadOnHangup() }
            s.arm()
            signals.append(s)
        }
        signal(SIGPIPE, SIG_IGN)
        fireTimers()
        startSnapshots()
        startLeaseRenewals()
        let plainNote = plaintextListener.map { ", plaintext on \(configuration.plaintextListen!.host):\($0.port)" } ?? ""
        log("listening on \(configuration.host):\(listener.port)\(credentials.tls == nil ? "" : " (TLS)")\(plainNote), clock \(engineClock.manual.map { "manual at \($0)" } ?? "system")")
        return listener.port
    }

    /// Runs the loop until shutdown.
    public func run() {
        loop.run()
        store.close()  // drops the instance lock: another service may start on this database now
    }

    /// Asks the loop, from any thread, to shut down gracefully (as SIGTERM does).
    public func requestShutdown() { stopRequest?.fire() }

    // MARK: Connections

    /// The bound port of the loopback plaintext listener beside TLS, if any.
    public var plaintextPort: Int? { plaintextListener?.port }

    /// Raises the open-file limit to its hard limit and keeps the connections within what it
    /// allows (`FileLimit`): past it, clients get `busy` like past `--max-connections`, instead of
    /// waiting in the kernel's backlog while every `accept` fails.
    func limitConnectionsToFileLimit() {
        connections.limit = configuration.maxConnections
        guard let soft = FileLimit.raiseSoftToHard() else { return }
        let allowed = FileLimit.connections(allowedBy: soft)
        if allowed < connections.limit {
            connections.limit = allowed
            log("warning: --max-connections \(configuration.maxConnections) is more than the open-file limit allows (\(soft) descriptors, \(FileLimit.reserved) of them kept for PostgreSQL and the service): serving at most \(allowed) connections; raise the limit (ulimit -n, systemd LimitNOFILE=) to serve more")
        }
    }

    func accept(_ fd: Int32, tls: TLSContext?) {
        // At the limit, the oldest connection without hello for `evictBeforeHelloMilliseconds` (1 s)
        // gives its slot up — as many as it takes, since a closing connection keeps its slot while
        // it lingers: clients that never said hello held every slot until their hello deadline and
        // kept operators and consumers out.
        if lifecycle.isServing, connections.isFull {
            let now = ClientConnection.monotonicMilliseconds()
            while let c = connections.nextToEvict(now: now, helloGrace: configuration.evictBeforeHelloMilliseconds) {
                if c.evictBeforeHello(line: WireReply.error(rid: nil, .evictedBeforeHello),
                                      reason: "no hello after \(now - c.acceptedAt) ms while the service is at its connection limit (\(connections.limit)): its slot goes to a new client") {
                    connections.evicted()
                }
            }
        }
        if !lifecycle.isServing || connections.isFull {
            // Plaintext only: a TLS client could not read a line written outside TLS; it just sees the close.
            if tls == nil {
                let line = WireReply.error(rid: nil, .busy)
                _ = line.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            }
            close(fd)
            return
        }
        let id = connections.takeId()
        var session = ClientSession(tokens: credentials.tokens, serverName: configuration.serverName)
        session.topology = topology()
        guard let connection = ClientConnection(id: id, fd: fd, loop: loop, session: session,
                                                maxLineBytes: configuration.maxLineBytes, delegate: asConnectionDelegate, tls: tls) else {
            log("connection \(id) refused: could not set up its \(tls == nil ? "socket" : "TLS session") in libevent (memory exhausted?); the client sees the connection close and may retry")
            // libevent has not closed it on these paths (it does only once the bufferevent owns it).
            if fcntl(fd, F_GETFD) != -1 { close(fd) }
            return
        }
        var limits = ClientConnection.Limits()
        limits.helloMilliseconds = configuration.helloTimeoutMilliseconds
        limits.idleMilliseconds = configuration.idleTimeoutMilliseconds
        limits.writeMilliseconds = configuration.writeTimeoutMilliseconds
        limits.maxUnsentBytes = configuration.consumerBufferBytes
        connection.startDeadlines(limits)
        connections.accepted(connection)
    }

    func connectionClosing(_ connection: ClientConnection, reason: String) {
        logConnectionClosing(connection, reason: reason)
        if let (name, handover) = consumers.connectionClosing(connection) { handOver(name, handover) }
    }

    func connectionWarning(_ connection: ClientConnection, _ message: String) {
        logConnectionWarning(connection, message)
    }

    func connectionClosed(_ connection: ClientConnection) {
        // Freed one loop turn later: libevent may still be inside this connection's callback.
        connections.closed(connection)
        reaper?.arm(afterMilliseconds: 0)
    }

    func handle(_ request: ClientSession.Request, from connection: ClientConnection) {
        // The ticket alone, not the request (a copy of its strings, grant and body per reply).
        // The connection is held strongly until the reply: a weak reference costs a side-table
        // load per reply; a connection closed meanwhile ignores it (`complete`).
        let ticket = request.ticket
        let reply = Reply(connection: connection, ticket: ticket, op: request.op, startedAt: requestMetrics.start(), metrics: requestMetrics)
        // A plain submit first: it shares the app string before the door (below).
        if request.submitLine != nil {
            // A connection's first submit for an app (its app string read from the line): the
            // registry's string for the app replaces it, here and in the connection's next
            // submits, so the engine's look-ups compare one word, not two equal strings' bytes.
            // (Read through the optional, not bound: `if let` would copy the whole line.)
            if request.submitLine?.appIsKnown == false, let shared = apps.registeredName(request.submitLine!.app) {
                var request = request
                request.submitLine!.shareApp(shared)
                connection.shareApp(shared)
                submitEvent(request, reply: reply)
                return
            }
            submitEvent(request, reply: reply)
            return
        }
        switch request.op {
        case .stats: reply(WireReply.ok(rid: request.rid, stats()))
        case .subscribe: subscribe(request, connection: connection, reply: reply)
        case .ack: ack(request, connection: connection, reply: reply)
        case .consumers: listConsumers(request, reply: reply)
        case .deleteConsumer: deleteConsumer(request, reply: reply)
        case .clock: clock(request, reply: reply)
        case .submit, .withdraw, .authorization, .settings, .provisionalKeep, .provisionalTurnOff, .summarySchedule,
             .focusDefine, .focusOn, .focusOff, .mute, .snooze, .opened, .badgeClear, .registerApp, .erase:
            submitEvent(request, reply: reply)
        case .hello, .ping:
            // Answered by the session (`Op.Path.session`), never dispatched.
            preconditionFailure("\(request.op.name) is the session's to answer")
        }
    }

    func stats() -> [String: JSONValue] {
        [
            "op": "stats",
            "eventsCommitted": .int(Int64(eventsCommitted)),
            "deliveriesCommitted": .int(Int64(deliveriesCommitted)),
            "requestsRejected": .int(Int64(requestsRejected)),
            // Wrong, missing or non-string tokens, closed connections' and open ones' (token guessing shows here).
            "hellosRefused": .int(Int64(connections.hellosRefused)),
            "users": .int(Int64(users.count)),
            "timers": .int(Int64(timers.wheel.count)),
            "timerWakeups": .int(Int64(timers.wakeups)),
            "connections": .int(Int64(connections.count)),
            "connectionLimit": .int(Int64(connections.limit)),
            "evictedBeforeHello": .int(Int64(connections.evictedBeforeHello)),
            "acceptFailures": .int(Int64((listener?.acceptFailures ?? 0) + (plaintextListener?.acceptFailures ?? 0))),
            "consumers": .int(Int64(consumers.count)),
            // The most output bytes queued in the server for one consumer: bounded by the
            // consumer buffer (plus one batch) however slowly the consumer reads.
            "maxConsumerQueuedBytes": .int(Int64(consumers.maxQueuedBytes)),
            "deliveryHead": .int(deliveryHead),
            // The recent delivery lines kept in memory for consumers, bounded in count and bytes.
            "deliveryRingLines": .int(Int64(ring.count)),
            "deliveryRingBytes": .int(Int64(ring.bytes)),
            "tokenCredentials": .int(Int64(credentials.tokens.count)),
            "tokenReloads": .int(Int64(credentials.tokenReloads)),
            "tokenReloadFailures": .int(Int64(credentials.tokenReloadFailures)),
            "certificateReloads": .int(Int64(credentials.certificateReloads)),
            "certificateReloadFailures": .int(Int64(credentials.certificateReloadFailures)),
            "now": .string(now().rfc3339),
            // Lean pending items' content read back when due, and events waiting for it (docs/restart.md).
            "contentReads": .int(Int64(restart.content.reads)),
            "contentRowsRead": .int(Int64(restart.content.rowsRead)),
            "contentWaiting": .int(Int64(restart.content.wanted.count)),
            "foldsWaitingForContent": .int(Int64(restart.content.heldFolds.count)),
            "snapshotsWritten": .int(Int64(restart.writer?.completed ?? 0)),
            "firing": phases.json,
            "loopCpuMs": .int(Self.threadCPUMilliseconds()),
            "loopMinorFaults": .int(Self.threadMinorFaults()),
            // The current writer connections' counters, summed (they restart after a reconnect).
            "storeTransactions": .int(writerSum(\.transactionsCommitted)),
            "storeRoundTrips": .int(writerSum(\.roundTrips)),
            "storeTransactionsOverlapped": .int(writerSum(\.transactionsOverlapped)),
            "storeCopiesSentWhileCompleting": .int(writerSum(\.copiesSentWhileCompleting)),
            "storeDeliveriesCopied": .int(writerSum(\.deliveriesCopied)),
            "storeBackendPID": .int(Int64(store.writer?.connection.backendPID ?? 0)),
            "storeDeliveriesChained": .int(writerSum(\.deliveriesChained)),
            "storeDeliveryBackendPIDs": .array(deliveryStores.map { .int(Int64($0.writer?.connection.backendPID ?? 0)) }),
        ]
    }

    /// A counter of the writer connections (events', and deliveries' if separate), summed.
    private func writerSum(_ counter: KeyPath<GroupCommitWriter, Int>) -> Int64 {
        Int64(([store] + deliveryStores).compactMap { $0.writer?[keyPath: counter] }.reduce(0, +))
    }

    /// CPU time (user + system) of the calling thread: `stats` runs on the loop thread.
    static func threadCPUMilliseconds() -> Int64 {
        var ts = timespec()
        guard clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0 else { return -1 }
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }

    /// Page faults served without I/O on the calling thread so far (the loop's, from `stats`):
    /// each first touch of memory the kernel had to hand out and zero.
    static func threadMinorFaults() -> Int64 {
        var usage = rusage()
        // RUSAGE_THREAD (1, Linux): a GNU extension the Glibc module does not export.
        guard getrusage(__rusage_who_t(1), &usage) == 0 else { return -1 }
        return Int64(usage.ru_minflt)
    }

    /// A reconnected events writer takes the instance lock again (a PostgreSQL restart dropped
    /// it with the session). Best effort: found held by another session, the service warns and
    /// serves on, as it did before the lock existed. The holder may be this service's own earlier
    /// session that PostgreSQL has not yet seen go (a network cut), and stopping, or refusing
    /// requests, would take a healthy service down for it; nor can the lock fence deliveries,
    /// which other connections append. It is tried again at the next reconnect.
    func retakeInstanceLock(_ connection: PGConnection) {
        do {
            try InstanceLock.take(connection, waitMilliseconds: 0)
            if instanceLockMissing { log("notice: the instance lock is this service's again") }
            instanceLockMissing = false
        } catch .configuration(let why) {
            instanceLockMissing = true
            log("warning: serving without the instance lock: \(why) It is taken again at the next reconnect; "
                + "until then a second herald serve could start on this database.")
        } catch {
            instanceLockMissing = true
            log("warning: serving without the instance lock: taking it failed (\(error)); it is taken again at the next reconnect.")
        }
    }

    // MARK: Shutdown

    /// The line every connection gets when the service stops (SPEC §5).
    static let goodbyeLine = WireReply.line(.object(["op": "goodbye", "reason": "shutting_down"]))

    /// SIGTERM or SIGINT, a lame-duck stop: stop accepting; tell every connection `goodbye` and
    /// read no more from it; finish in-flight commits (their clients get their acks, then each
    /// connection closes); then stop.
    func beginShutdown() {
        guard lifecycle.shutdownRequested() else { return }
        log("shutting down: no new connections; goodbye to \(connections.count) connection(s); finishing in-flight commits")
        listener?.disable()
        plaintextListener?.disable()
        for c in connections.open.values { c.goodbye(Self.goodbyeLine, reason: "server shutting down (goodbye sent)") }
        shutdownTimer = loop.timer { [unretained] in unretained.object?.shutdownStep() }
        shutdownTimer?.arm(afterMilliseconds: 0)
    }

    /// Drains (every in-flight commit answered, decided deliveries committed, due timers fired),
    /// closes the connections, then writes a final snapshot so the next start folds nothing
    /// (HeraldService+Snapshot, `shutdownSnapshotStep`), then stops the loop (`ServiceLifecycle`).
    private func shutdownStep() {
        // Timers and events waiting for lean content wait for PostgreSQL: while it cannot be read, do
        // not wait for them (they are in the log; the next start decides them).
        let waiting = (dueUsers.isEmpty && restart.content.heldFolds.isEmpty) || restart.content.failingSince != nil
        // Fenced (the partition is another instance's now), nothing more can be stored here: the
        // deliveries still unsent are its new owner's to derive, and no commit is worth waiting for.
        let idle = fencedOut || ((store.writer?.isIdle ?? true) && deliveryStores.allSatisfy { $0.writer?.isIdle ?? true }
            && deliveryAppends.unsent.isEmpty && !deliveriesInFlight && waiting)
        let step = lifecycle.drainChecked(idle: idle, writersReady: store.isReady && deliveryLinks.allSatisfy(\.isReady),
                                          storeReady: store.isReady, openConnections: connections.count,
                                          now: ClientConnection.monotonicMilliseconds())
        perform(step)
    }

    private func perform(_ step: ServiceLifecycle.ShutdownStep?) {
        switch step {
        case nil:
            break
        case .checkAgain(let milliseconds)?:
            shutdownTimer?.arm(afterMilliseconds: milliseconds)
        case .closeConnections?:
            for c in connections.open.values { c.close(reason: "server shutting down") }
            shutdownStep()
        case .writeFinalSnapshot?:
            // Fenced: the partition is another instance's, which snapshots it; nothing here can be stored.
            perform(lifecycle.finalSnapshotStepped(moreToDo: fencedOut ? false : shutdownSnapshotStep()))
        case .stop?:
            stopSnapshots()
            releaseLease()
            loop.stop()
        }
    }
}
