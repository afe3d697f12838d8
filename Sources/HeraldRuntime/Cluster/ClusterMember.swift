// `herald serve --instance`: one of several instances serving a partitioned database (SPEC §9).
import Foundation
import Glibc
import HeraldCore
import HeraldStore
import Prometheus

/// A cluster member: a router on `--listen` for every client, and a partition service for each
/// partition it holds the lease of. Every third of the lease TTL it writes its heartbeat and reads
/// the leases and live members (the database's clock judges both); its `MembershipStateMachine`
/// then takes free or expired partitions up to its share and hands one over when it holds more,
/// and the member starts or stops their services and tells the router who owns what. A graceful
/// stop tells clients goodbye, hands every partition over (each service releases its lease, so
/// other members take them at their next read), relays what its clients were still owed, leaves,
/// then ends.
public final class ClusterMember {
    public let configuration: ServiceConfiguration
    /// The token other instances accept (`--peer-token-file`); nil: they run in dev mode.
    public var peerToken: String?
    public let loop = EventLoop()
    public var log: (String) -> Void
    private var router: Router?
    private var hosts: [Int: PartitionHost] = [:]
    /// Which partitions to take, serve and hand over (pure; this class performs its actions).
    private var membership: MembershipStateMachine
    /// The machine's `leave` was carried out: the member may end once its clients are answered.
    private var left = false
    private var partitioning = Partitioning.single
    private var view: PGConnection?
    private var tickTimer: LoopEvent?
    private var stopRequest: LoopTrigger?
    private var signals: [LoopEvent] = []
    private var stopping = false
    private var stopDeadline: Int64 = 0
    private let internalToken = ClusterMember.randomToken()
    private let unretained = Unretained<ClusterMember>()
    private let postQueue = PostQueue()
    private var postTrigger: LoopTrigger?
    private var advertised = ""
    /// `--http`: the member's metrics and probes, and its partitions' series.
    private var observability: MemberObservability?

    /// This member's name (`--instance`).
    let instance: String

    public init(configuration: ServiceConfiguration, log: @escaping (String) -> Void) {
        self.configuration = configuration
        self.log = log
        instance = configuration.instanceName ?? "\(HeraldService.hostName):\(configuration.port)"
        membership = MembershipStateMachine(instance: instance, ttlMilliseconds: configuration.leaseTTLMilliseconds)
        unretained.object = self
    }

    deinit { unretained.object = nil }

    /// Migrates, binds the router, takes this member's share of the free partitions and starts
    /// their services (restores run in the background); returns the router's port.
    @discardableResult
    public func start() throws -> Int {
        let conn = try PGConnection.connect(configuration.databaseURL)
        try DurabilityCheck.require(conn, allowUnsafe: configuration.allowUnsafeDurability, log: log)
        try Migrator.migrate(conn) { self.log($0) }
        try InstanceLock.takeShared(conn)
        partitioning = try EventReader.partitioning(conn)
        view = conn
        var settings = Router.Settings()
        settings.host = configuration.host
        settings.port = configuration.port
        settings.tokens = try configuration.tokensFile.map { path throws(ServiceError) in try TokenFile.load(path) } ?? configuration.tokens
        if settings.tokens.isDevMode { log("dev mode: no tokens configured, every hello is granted every role (pass --tokens FILE in production)") }
        if let tls = configuration.tls { settings.tls = try TLSContext(tls) }
        settings.serverName = configuration.serverName
        settings.maxLineBytes = configuration.maxLineBytes
        settings.maxConnections = configuration.maxConnections
        settings.limits.helloMilliseconds = configuration.helloTimeoutMilliseconds
        settings.limits.idleMilliseconds = configuration.idleTimeoutMilliseconds
        settings.limits.writeMilliseconds = configuration.writeTimeoutMilliseconds
        settings.limits.maxUnsentBytes = configuration.consumerBufferBytes
        settings.instance = instance
        settings.internalToken = internalToken
        settings.peerToken = peerToken
        settings.parkMilliseconds = max(30_000, 3 * configuration.leaseTTLMilliseconds)
        if let n = ProcessInfo.processInfo.environment["HERALD_UNSAFE_ROUTER_ACKS_FOR_TESTING"].flatMap(Int.init), n > 0 {
            settings.acknowledgeEveryNthUnsentForTesting = n
            log("WARNING: HERALD_UNSAFE_ROUTER_ACKS_FOR_TESTING=\(n): every \(n)th submit is acknowledged and never stored. Only for testing the cluster checker.")
        }
        let router = Router(loop: loop, settings: settings, partitioning: partitioning, advertised: "", log: log)
        let port = try router.listen()
        advertised = configuration.advertise ?? "\(configuration.host == "0.0.0.0" ? HeraldService.hostName : configuration.host):\(port)"
        router.advertised = advertised
        router.wantsRoutes = { [unretained] in unretained.object?.tickSoon() }
        self.router = router
        postTrigger = loop.trigger { [unretained] in unretained.object?.runPosted() }
        stopRequest = loop.trigger { [unretained] in unretained.object?.beginStop() }
        if configuration.handleSignals {
            for sig in [SIGTERM, SIGINT] {
                let s = loop.signal(sig) { [unretained] in unretained.object?.beginStop() }
                s.arm()
                signals.append(s)
            }
            signal(SIGPIPE, SIG_IGN)
        }
        if configuration.handleHangup ?? configuration.handleSignals {
            let s = loop.signal(SIGHUP) { [unretained] in unretained.object?.reloadOnHangup() }
            s.arm()
            signals.append(s)
        }
        tickTimer = loop.timer { [unretained] in unretained.object?.tick() }
        quickTimer = loop.timer { [unretained] in unretained.object?.quickRound() }
        perform(membership.startRequested(now: ClientConnection.monotonicMilliseconds()))
        log("listening on \(configuration.host):\(port) as instance \(instance) (advertised \(advertised)), \(partitioning.count) partition(s)")
        return port
    }

    /// Serves /metrics, /healthz and /readyz on `host:port` (`--http`), before `start()` (the
    /// loop runs once `run()` is called); returns the bound port. Partition services started from
    /// now on publish their series into it.
    @discardableResult
    public func startHTTP(host: String, port: Int) throws(ServiceError) -> Int {
        let observability = MemberObservability()
        observability.state = { [unretained] in
            guard let self = unretained.object, let router = self.router else { return MemberObservability.State() }
            return MemberObservability.State(held: self.hosts.count, partitions: self.partitioning.count,
                                             unowned: router.owners.byPartition.filter { $0 == nil }.count,
                                             connections: router.openConnections, forwarded: router.forwarded,
                                             forwardedRemote: router.forwardedRemote, parked: router.parkedCount,
                                             stopping: self.stopping)
        }
        let bound = try observability.start(loop: loop, host: host, port: port)
        self.observability = observability
        log("HTTP on \(host):\(bound): /metrics, /healthz, /readyz")
        return bound
    }

    /// The registry swift-metrics may report into (`--http`), nil without it.
    public var metricsFactory: PrometheusMetricsFactory? { observability.map { PrometheusMetricsFactory(registry: $0.registry) } }

    /// Runs the loop until the stop has finished.
    public func run() {
        loop.run()
        for host in hosts.values { _ = host.wait(seconds: 30) }
        observability?.stop()
        router?.closeAll()
        view?.close()
    }

    /// Asks for a graceful stop, from any thread.
    public func requestShutdown() { stopRequest?.fire() }

    /// Which partitions this member serves now (tests, status).
    public var served: [Int] { router?.local.keys.sorted() ?? [] }

    // MARK: Leases

    /// Reads the cluster view now and then (a link was lost or a request refused): the router
    /// learns new owners at once, and a round plans the takes when the machine allows one.
    private var lastQuickRound: Int64 = 0

    private func tickSoon() {
        let now = ClientConnection.monotonicMilliseconds()
        guard now - lastQuickRound >= 100 else { return }
        lastQuickRound = now
        quickTimer?.arm(afterMilliseconds: 20)
    }

    private var quickTimer: LoopEvent?

    private func quickRound() {
        readView(planning: false)
        perform(membership.tickDue(now: ClientConnection.monotonicMilliseconds()))
    }

    /// Carries the membership machine's actions out (blocking statements on the member's own
    /// connection: a round is a few short statements every third of the TTL).
    private func perform(_ actions: [MembershipStateMachine.Action]) {
        for action in actions {
            switch action {
            case .heartbeat:
                var ok = true
                do { try ClusterSQL.heartbeat(connection(), instance: instance, address: advertised, ttlMilliseconds: configuration.leaseTTLMilliseconds) }
                catch { ok = false; connectionFailed(error, "write the heartbeat") }
                perform(membership.heartbeatCompleted(ok: ok))
            case .readView:
                readView(planning: true)
            case .take(let p, let expected):
                var epoch: Int64?
                let sentAt = ClientConnection.monotonicMilliseconds()
                do {
                    epoch = try ClusterSQL.take(connection(), partition: p, instance: instance, address: advertised,
                                                ttlMilliseconds: configuration.leaseTTLMilliseconds, expectedEpoch: expected)
                } catch where ClusterSQL.isLockWaitTimeout(error) {
                    log("notice: partition \(p) is free but its row is locked (an owner paused in an append?); taking it later")
                    perform(membership.takeFoundRowLocked(partition: p, now: sentAt))
                    continue
                } catch {
                    connectionFailed(error, "take partition \(p)")
                }
                perform(membership.takeCompleted(partition: p, epoch: epoch))
            case .startServing(let p, let epoch):
                log("took partition \(p) at epoch \(epoch); restoring it")
                startHost(p, epoch: epoch)
            case .release(let p, let epoch):
                _ = try? connection().execute(LeaseSQL.release, [String(p), String(epoch)])
            case .handOver(let p):
                log("handing partition \(p) over")
                if let host = hosts[p] { host.stop() } else { perform(membership.handOverCompleted(partition: p)) }
            case .leave:
                _ = try? ClusterSQL.leave(connection(), instance: instance)
                left = true
                stopStep()
            case .armTick(let ms):
                tickTimer?.arm(afterMilliseconds: ms)
            }
        }
    }

    private func tick() {
        perform(membership.tickDue(now: ClientConnection.monotonicMilliseconds()))
        if stopping {
            // Requests still owed to clients wait for the partitions' new owners: keep learning them.
            readView(planning: false)
            stopStep()
        }
    }

    /// Reads the cluster view; tells the router each partition's owner; with `planning`, hands the
    /// view to the machine to plan the round.
    private func readView(planning: Bool) {
        let view: ClusterView
        do {
            view = try ClusterSQL.view(connection())
        } catch {
            connectionFailed(error, "read the cluster view")
            if planning { perform(membership.viewReadFailed()) }
            return
        }
        var owners = Owners(partitions: partitioning.count)
        for row in view.partitions where row.partition < partitioning.count {
            if router?.local[row.partition] != nil, let epoch = hosts[row.partition]?.epoch {
                owners[row.partition] = Owner(instance: instance, address: advertised, epoch: epoch)
            } else if row.leaseLive, let owner = row.owner, owner != instance, let address = row.address {
                owners[row.partition] = Owner(instance: owner, address: address, epoch: row.epoch)
            }
        }
        router?.ownersChanged(owners)
        if planning { perform(membership.viewRead(view)) }
    }

    /// The member's connection, connected again (with its share of the instance lock) when lost.
    private func connection() throws(StoreError) -> PGConnection {
        if let view, !view.isBad { return view }
        view?.close()
        let fresh = try PGConnection.connect(configuration.databaseURL)
        do { try InstanceLock.takeShared(fresh) } catch { log("warning: \(error)") }
        view = fresh
        return fresh
    }

    private func connectionFailed(_ error: StoreError, _ what: String) {
        log("warning: could not \(what) (\(error)); serving on with what is known")
        if view?.isBad == true { view?.close(); view = nil }
    }

    private func startHost(_ p: Int, epoch: Int64) {
        var config = configuration
        config.partition = p
        config.leaseEpoch = epoch
        config.host = "127.0.0.1"
        config.port = 0
        config.handleSignals = false
        config.handleHangup = false
        config.tokens = TokenTable([internalToken: Grant(name: "router", roles: Set(Role.allCases), apps: nil)])
        config.tokensFile = nil
        config.tls = nil
        config.plaintextListen = nil
        config.instanceName = instance
        config.advertise = advertised
        let host = PartitionHost(partition: p, epoch: epoch)
        hosts[p] = host
        let queue = postQueue
        let trigger = postTrigger
        let member = unretained
        host.start(config, metrics: observability.map { ($0.registry, $0.durations) }, log: log, post: { work in
            queue.append(work)
            trigger?.fire()
        }, started: { port in
            guard let self = member.object else { return }
            self.router?.local[p] = "127.0.0.1:\(port)"
            self.log("serving partition \(p) at epoch \(epoch)")
            self.perform(self.membership.partitionStarted(partition: p))
            self.readView(planning: false)
        }, failed: { why in
            guard let self = member.object else { return }
            self.log("warning: partition \(p) could not start: \(why)")
        }, stopped: {
            guard let self = member.object else { return }
            self.hosts[p] = nil
            self.router?.local[p] = nil
            self.log("partition \(p) stopped")
            // Handed over (its lease released by the service's stop), or lost (another took it).
            if self.membership.handingOver[p] != nil {
                self.perform(self.membership.handOverCompleted(partition: p))
            } else {
                self.perform(self.membership.partitionLost(partition: p))
            }
            self.tickSoon()
            if self.stopping { self.stopStep() }
        })
    }

    // MARK: SIGHUP

    /// Reads the tokens file and the TLS certificate and key again into the router (the partition
    /// services take only the router's internal token, over loopback, without TLS). Files that do
    /// not load change nothing; the error is logged.
    func reloadOnHangup() {
        guard let router else { return }
        if let path = configuration.tokensFile {
            do {
                let table = try TokenFile.load(path)
                let revoked = router.tokensReloaded(table)
                log("SIGHUP: tokens reloaded from \(path): \(table.count) credential(s); \(revoked) connection(s) lost their grant and were closed")
                if let warning = TokenFile.plainTokenWarning(table, path: path) { log(warning) }
            } catch {
                log("error: SIGHUP: \(error) The previous credentials stay in force; fix the file and send SIGHUP again.")
            }
        } else {
            log("SIGHUP: no --tokens file to reload (dev mode stays on); nothing changed")
        }
        if let tls = configuration.tls {
            do {
                router.certificateReloaded(try TLSContext(tls))
                log("SIGHUP: TLS certificate and key reloaded from \(tls.certificateFile) and \(tls.keyFile); new connections use them, open ones keep theirs")
            } catch {
                log("error: SIGHUP: \(error) The previous certificate, key and client CRL stay in use; fix the files and send SIGHUP again.")
            }
        }
    }

    // MARK: Posting from the partitions' threads

    private func runPosted() {
        for work in postQueue.takeAll() { work() }
    }

    // MARK: Stopping

    private func beginStop() {
        guard !stopping else { return }
        stopping = true
        stopDeadline = ClientConnection.monotonicMilliseconds() + 60_000
        log("shutting down: goodbye to clients; handing partitions \(hosts.keys.sorted()) over")
        router?.beginDrain()
        perform(membership.stopRequested())
        tickTimer?.arm(afterMilliseconds: 100)
    }

    /// Ends the loop once every partition is handed over, the member has left, and its clients
    /// have their replies (or at the deadline).
    private func stopStep() {
        let open = router?.openConnections ?? 0
        if (left && hosts.isEmpty && open == 0) || ClientConnection.monotonicMilliseconds() > stopDeadline {
            router?.closeAll()
            loop.stop()
        } else {
            tickTimer?.arm(afterMilliseconds: 50)
        }
    }

    static func randomToken() -> String {
        var bytes = [UInt8](repeating: 0, count: 24)
        for i in bytes.indices { bytes[i] = UInt8.random(in: 0...255) }
        return bytes.map { String(format: "%02x", $0) }.joined()
    }
}

/// Work posted from other threads onto the member's loop.
struct PostQueue: @unchecked Sendable {
    // Why @unchecked Sendable: `items` is only touched while holding `lock`.
    private let lock = NSLock()
    private let box = Box()
    final class Box { var items: [() -> Void] = [] }
    func append(_ work: @escaping () -> Void) { lock.withLock { box.items.append(work) } }
    func takeAll() -> [() -> Void] { lock.withLock { defer { box.items = [] }; return box.items } }
}
