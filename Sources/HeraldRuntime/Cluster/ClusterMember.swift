// `herald serve --instance`: one of several instances serving a partitioned database (SPEC §9).
import Foundation
import Glibc
import HeraldCore
import HeraldStore

/// A cluster member: a router on `--listen` for every client, and a partition service for each
/// partition it holds the lease of. Every third of the lease TTL it reads the leases (the
/// database's clock judges them), takes free or expired partitions up to its share, starts their
/// services, and tells the router who owns what. A graceful stop tells clients goodbye, stops its
/// services (each releases its lease, so other members take the partitions at their next read),
/// relays what its clients were still owed, then ends.
public final class ClusterMember {
    public let configuration: ServiceConfiguration
    /// The token other instances accept (`--peer-token-file`); nil: they run in dev mode.
    public var peerToken: String?
    public let loop = EventLoop()
    public var log: (String) -> Void
    private var router: Router?
    private var hosts: [Int: PartitionHost] = [:]
    /// Partitions whose service is starting (restoring): not yet routed to.
    private var starting: Set<Int> = []
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

    public init(configuration: ServiceConfiguration, log: @escaping (String) -> Void) {
        self.configuration = configuration
        self.log = log
        unretained.object = self
    }

    deinit { unretained.object = nil }

    var instance: String { configuration.instanceName ?? "\(HeraldService.hostName):\(configuration.port)" }

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
        tickTimer = loop.timer { [unretained] in unretained.object?.tick() }
        tick()
        log("listening on \(configuration.host):\(port) as instance \(instance) (advertised \(advertised)), \(partitioning.count) partition(s)")
        return port
    }

    /// Runs the loop until the stop has finished.
    public func run() {
        loop.run()
        for host in hosts.values { _ = host.wait(seconds: 30) }
        router?.closeAll()
        view?.close()
    }

    /// Asks for a graceful stop, from any thread.
    public func requestShutdown() { stopRequest?.fire() }

    /// Which partitions this member serves now (tests, status).
    public var served: [Int] { router?.local.keys.sorted() ?? [] }

    // MARK: Leases

    private var tickArmed = false

    /// Reads left at a short interval: an owner just went away (a link lost, a request refused),
    /// and its partitions are taken the moment its leases are released or expire.
    private var quickReads = 0

    private func tickSoon() {
        quickReads = 20
        guard !tickArmed else { return }
        tickArmed = true
        tickTimer?.arm(afterMilliseconds: 50)
    }

    /// Reads the leases; takes this member's share of what is free; publishes the owners.
    private func tick() {
        tickArmed = false
        defer {
            if !tickArmed {
                tickArmed = true
                let regular = max(configuration.leaseTTLMilliseconds / 3, 50)
                if quickReads > 0 { quickReads -= 1 }
                tickTimer?.arm(afterMilliseconds: quickReads > 0 ? min(200, regular) : regular)
            }
        }
        guard let conn = view else { return }
        let rows: PGResult
        do {
            rows = try conn.execute("""
                SELECT partition, epoch, owner, address, coalesce(lease_expires > now(), false) FROM partitions ORDER BY partition
                """)
        } catch {
            log("warning: could not read the partitions' leases (\(error)); serving on with what is known")
            if conn.isBad, let fresh = try? PGConnection.connect(configuration.databaseURL) {
                conn.close()
                view = fresh
                do { try InstanceLock.takeShared(fresh) } catch { log("warning: \(error)") }
            }
            return
        }
        var owners = Owners(partitions: partitioning.count)
        var free: [(partition: Int, epoch: Int64)] = []
        var liveOwners: Set<String> = [instance]
        for i in 0..<rows.rowCount {
            guard let p = rows.int64(i, 0).map(Int.init), let epoch = rows.int64(i, 1) else { continue }
            let live = rows.string(i, 4) == "t"
            if let host = hosts[p], !starting.contains(p) {
                owners[p] = Owner(instance: instance, address: advertised, epoch: host.epoch)
            } else if live, let owner = rows.string(i, 2), owner != instance || hosts[p] != nil {
                owners[p] = Owner(instance: owner, address: rows.string(i, 3) ?? "", epoch: epoch)
                liveOwners.insert(owner)
            } else if hosts[p] == nil {
                free.append((p, epoch))
            }
        }
        if !stopping {
            let members = liveOwners.sorted()
            let index = members.firstIndex(of: instance) ?? 0
            let share = partitioning.count / members.count + (index < partitioning.count % members.count ? 1 : 0)
            // Partitions "preferred" by this member first (p mod N = its index), so members starting
            // together do not all race for the same ones.
            let ordered = free.filter { $0.partition % members.count == index } + free.filter { $0.partition % members.count != index }
            for candidate in ordered where hosts.count < share {
                take(candidate.partition, expectedEpoch: candidate.epoch, conn)
            }
        }
        router?.ownersChanged(owners)
        if stopping { stopStep() }
    }

    /// Takes partition `p` if it is still free at `expectedEpoch`, then starts its service.
    private func take(_ p: Int, expectedEpoch: Int64, _ conn: PGConnection) {
        let taken: Int64?
        do {
            taken = try conn.execute("""
                UPDATE partitions SET epoch = epoch + 1, owner = $2, address = $3,
                       lease_expires = now() + $4::bigint * interval '1 millisecond'
                WHERE partition = $1::integer AND epoch = $5::bigint
                  AND (owner IS NULL OR lease_expires IS NULL OR lease_expires <= now())
                RETURNING epoch
                """, [String(p), instance, advertised, String(configuration.leaseTTLMilliseconds), String(expectedEpoch)]).int64(0, 0)
        } catch {
            log("warning: could not take partition \(p): \(error)")
            return
        }
        guard let epoch = taken else { return }
        log("took partition \(p) at epoch \(epoch); restoring it")
        startHost(p, epoch: epoch)
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
        starting.insert(p)
        let queue = postQueue
        let trigger = postTrigger
        let member = unretained
        host.start(config, log: log, post: { work in
            queue.append(work)
            trigger?.fire()
        }, started: { port in
            guard let self = member.object else { return }
            self.starting.remove(p)
            self.router?.local[p] = "127.0.0.1:\(port)"
            self.log("serving partition \(p) at epoch \(epoch)")
            self.tickSoon()
        }, failed: { why in
            guard let self = member.object else { return }
            self.log("warning: partition \(p) could not start: \(why)")
        }, stopped: {
            guard let self = member.object else { return }
            self.starting.remove(p)
            self.hosts[p] = nil
            self.router?.local[p] = nil
            self.log("partition \(p) stopped")
            self.tickSoon()
        })
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
        for host in hosts.values { host.stop() }
        tickSoon()
    }

    private func stopStep() {
        let open = router?.openConnections ?? 0
        if (hosts.isEmpty && open == 0) || ClientConnection.monotonicMilliseconds() > stopDeadline {
            router?.closeAll()
            loop.stop()
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
