// A seeded, in-memory cluster: instances run MembershipStateMachine against a partitions table with the SQL's take semantics.
import HeraldCore
import HeraldTestSupport

/// Instances joining, dying and leaving over one in-memory `partitions` + `instances` table that
/// behaves as schema/007's functions do (a take succeeds iff the epoch is the expected one and the
/// lease is free; a renewal iff the epoch is the holder's; expiry on the table's clock), with a
/// checker that records every broken promise of SPEC §9 as a violation. Each statement takes
/// effect a few milliseconds after it is sent and its answer arrives a few after that, so
/// instances interleave and race as they would over a network; one heartbeat in 20 is not written.
struct ClusterSimulation {
    typealias Planner = (ClusterView, String, Set<Int>, Set<Int>, Set<Int>) -> [BalanceAction]

    struct Row {
        var epoch: Int64 = 0
        var owner: String?
        var leaseExpires: Int64?
        func leaseLive(at now: Int64) -> Bool { owner != nil && (leaseExpires.map { $0 >= now } ?? false) }
    }

    struct Member {
        var machine: MembershipStateMachine
        let incarnation: Int
        var alive = true
        /// Paused (SIGSTOP) until then: its events wait.
        var pausedUntil: Int64 = 0
        /// Partitions it held when it was paused: it may lose them.
        var mayLose: Set<Int> = []
    }

    enum Answer {
        case heartbeat(ok: Bool)
        case view(ClusterView)
        case taken(partition: Int, epoch: Int64?)
        case started(partition: Int)
        case handedOver(partition: Int)
        case lost(partition: Int)
    }

    enum Event {
        case tick
        case apply(MembershipStateMachine.Action)
        case renew(partition: Int, epoch: Int64)
        case answer(Answer)
    }

    struct Scheduled {
        let at: Int64
        let order: Int
        let name: String
        let incarnation: Int
        let event: Event
    }

    let partitionCount: Int
    let ttl: Int64
    let planner: Planner
    var rng: SeededRandom
    private(set) var now: Int64 = 0
    private(set) var table: [Row]
    private(set) var heartbeats: [String: Int64] = [:]
    private(set) var members: [String: Member] = [:]
    private var queue: [Scheduled] = []
    private var order = 0
    private var incarnations = 0

    /// Every broken promise, in words.
    private(set) var violations: [String] = []
    /// Who took each (partition, epoch).
    private var takenBy: [[Int64]: String] = [:]
    /// Partitions a dead instance held, with their last renewal: each must be taken within 2×TTL of it.
    private var awaitingTakeover: [Int: Int64] = [:]
    /// Partitions handed over, with their release: each must be taken again soon.
    private var awaitingRetake: [Int: Int64] = [:]
    private(set) var longestTakeover: Int64 = 0
    private(set) var longestRetake: Int64 = 0
    private(set) var takes = 0
    private(set) var refusedTakes = 0
    /// Partitions a woken zombie found taken (its renewal refused).
    private(set) var zombieLosses = 0
    private(set) var unwrittenHeartbeats = 0

    init(seed: UInt64, partitions: Int = 16, ttlMilliseconds: Int64 = 3_000,
         planner: @escaping Planner = { PartitionBalancer.plan(view: $0, me: $1, serving: $2, acquiring: $3, handingOver: $4) }) {
        self.partitionCount = partitions
        self.ttl = ttlMilliseconds
        self.planner = planner
        self.rng = SeededRandom(seed: seed)
        self.table = Array(repeating: Row(), count: partitions)
    }

    var tick: Int64 { max(ttl / 3, 1) }
    var alive: [String] { members.filter { $0.value.alive }.map(\.key).sorted() }

    // MARK: What happens to instances

    mutating func join(_ name: String) {
        precondition(members[name]?.alive != true)
        incarnations += 1
        var member = Member(machine: MembershipStateMachine(instance: name, ttlMilliseconds: ttl), incarnation: incarnations)
        let actions = member.machine.startRequested(now: now)
        members[name] = member
        perform(actions, for: name)
    }

    /// `kill -9`: nothing more from it; its heartbeat and leases expire on the table's clock.
    mutating func kill(_ name: String) {
        members[name]?.alive = false
        for (p, row) in table.enumerated() where row.owner == name && row.leaseLive(at: now) {
            awaitingTakeover[p] = row.leaseExpires! - ttl
        }
    }

    /// SIGSTOP for `milliseconds`, then SIGCONT: a zombie whose leases are taken meanwhile, and
    /// which must lose them when it wakes.
    mutating func pause(_ name: String, for milliseconds: Int64) {
        guard members[name]?.alive == true else { return }
        members[name]!.pausedUntil = now + milliseconds
        let machine = members[name]!.machine
        members[name]!.mayLose = Set(machine.serving.keys).union(machine.starting.keys).union(machine.handingOver.keys)
        for (p, row) in table.enumerated() where row.owner == name && row.leaseLive(at: now) {
            awaitingTakeover[p] = row.leaseExpires! - ttl
        }
    }

    /// A graceful stop.
    mutating func stop(_ name: String) {
        guard members[name]?.alive == true else { return }
        let actions = members[name]!.machine.stopRequested()
        perform(actions, for: name)
    }

    /// Runs every event due up to `until`.
    mutating func run(until: Int64) {
        while let next = queue.first, next.at <= until {
            queue.removeFirst()
            now = next.at
            guard let member = members[next.name], member.alive, member.incarnation == next.incarnation else { continue }
            if member.pausedUntil > now {
                schedule(next.event, for: next.name, after: member.pausedUntil - now)
                continue
            }
            handle(next.event, for: next.name)
        }
        now = until
    }

    // MARK: The table (schema/007's semantics)

    private mutating func take(_ partition: Int, by name: String, expectedEpoch: Int64) -> Int64? {
        var row = table[partition]
        guard row.epoch == expectedEpoch, !row.leaseLive(at: now) else {
            refusedTakes += 1
            return nil
        }
        row.epoch += 1
        row.owner = name
        row.leaseExpires = now + ttl
        table[partition] = row
        takes += 1
        if let previous = takenBy[[Int64(partition), row.epoch]] {
            violations.append("partition \(partition) taken at epoch \(row.epoch) by \(previous) and \(name)")
        }
        takenBy[[Int64(partition), row.epoch]] = name
        if let last = awaitingTakeover.removeValue(forKey: partition) {
            longestTakeover = max(longestTakeover, now - last)
            if now - last > 2 * ttl {
                violations.append("partition \(partition) of a dead instance taken \(now - last) ms after its last renewal (TTL \(ttl))")
            }
        }
        if let released = awaitingRetake.removeValue(forKey: partition) {
            longestRetake = max(longestRetake, now - released)
        }
        return row.epoch
    }

    private mutating func release(_ partition: Int, epoch: Int64) {
        guard table[partition].epoch == epoch else { return }
        table[partition].leaseExpires = now - 1
        awaitingRetake[partition] = now
    }

    private func view() -> ClusterView {
        ClusterView(
            liveInstances: heartbeats.filter { $0.value > now }.map(\.key),
            partitions: table.enumerated().map { p, row in
                ClusterView.Partition(partition: p, epoch: row.epoch, owner: row.owner, address: row.owner.map { "\($0):7000" },
                                      leaseLive: row.leaseLive(at: now))
            })
    }

    // MARK: The service around each machine

    private mutating func schedule(_ event: Event, for name: String, after delay: Int64) {
        guard let member = members[name] else { return }
        order += 1
        let item = Scheduled(at: now + delay, order: order, name: name, incarnation: member.incarnation, event: event)
        let i = queue.firstIndex { ($0.at, $0.order) > (item.at, item.order) } ?? queue.endIndex
        queue.insert(item, at: i)
    }

    /// A statement's one-way trip: 1–20 ms.
    private mutating func latency() -> Int64 { Int64.random(in: 1...20, using: &rng) }

    private mutating func perform(_ actions: [MembershipStateMachine.Action], for name: String) {
        for action in actions {
            switch action {
            case .armTick(let ms):
                schedule(.tick, for: name, after: ms)
            case .startServing(let partition, _):
                // The rebuild from snapshot + log.
                schedule(.answer(.started(partition: partition)), for: name, after: Int64.random(in: 20...300, using: &rng))
            case .handOver:
                // The drain, then the release.
                schedule(.apply(action), for: name, after: Int64.random(in: 20...200, using: &rng))
            default:
                schedule(.apply(action), for: name, after: latency())
            }
        }
    }

    private mutating func handle(_ event: Event, for name: String) {
        switch event {
        case .tick:
            let actions = members[name]!.machine.tickDue(now: now)
            perform(actions, for: name)
            // Each held lease renewed once a tick (as its LeaseStateMachine does), but not while it is
            // handed over: the release must be the last word on it.
            let machine = members[name]!.machine
            for (p, epoch) in machine.serving.merging(machine.starting, uniquingKeysWith: { a, _ in a }) {
                schedule(.renew(partition: p, epoch: epoch), for: name, after: latency())
            }
        case .renew(let partition, let epoch):
            guard members[name]!.machine.epoch(of: partition) == epoch, members[name]!.machine.handingOver[partition] == nil else { return }
            if table[partition].epoch == epoch {
                table[partition].leaseExpires = now + ttl
            } else {
                schedule(.answer(.lost(partition: partition)), for: name, after: latency())
            }
        case .apply(let action):
            apply(action, for: name)
        case .answer(let answer):
            deliver(answer, to: name)
        }
    }

    private mutating func apply(_ action: MembershipStateMachine.Action, for name: String) {
        switch action {
        case .heartbeat:
            let written = Int.random(in: 0..<20, using: &rng) != 0
            if written { heartbeats[name] = now + ttl } else { unwrittenHeartbeats += 1 }
            schedule(.answer(.heartbeat(ok: written)), for: name, after: latency())
        case .readView:
            schedule(.answer(.view(view())), for: name, after: latency())
        case .take(let partition, let expectedEpoch):
            let epoch = take(partition, by: name, expectedEpoch: expectedEpoch)
            schedule(.answer(.taken(partition: partition, epoch: epoch)), for: name, after: latency())
        case .release(let partition, let epoch):
            release(partition, epoch: epoch)
        case .handOver(let partition):
            if let epoch = members[name]!.machine.epoch(of: partition) { release(partition, epoch: epoch) }
            schedule(.answer(.handedOver(partition: partition)), for: name, after: latency())
        case .leave:
            heartbeats[name] = nil
            members[name]!.alive = false
        case .startServing, .armTick:
            break
        }
    }

    private mutating func deliver(_ answer: Answer, to name: String) {
        var machine = members[name]!.machine
        let actions: [MembershipStateMachine.Action]
        switch answer {
        case .heartbeat(let ok):
            actions = machine.heartbeatCompleted(ok: ok)
        case .view(let view):
            actions = machine.viewRead(view, plannedBy: planner)
            for case .take(let p, _) in actions where view.partitions[p].leaseLive {
                violations.append("\(name) planned to take partition \(p), whose lease was live in the view it read")
            }
        case .taken(let partition, let epoch):
            actions = machine.takeCompleted(partition: partition, epoch: epoch)
        case .started(let partition):
            actions = machine.partitionStarted(partition: partition)
        case .handedOver(let partition):
            actions = machine.handOverCompleted(partition: partition)
        case .lost(let partition):
            if members[name]!.mayLose.contains(partition) {
                zombieLosses += 1
            } else {
                violations.append("\(name), alive and renewing on time, lost partition \(partition)")
            }
            actions = machine.partitionLost(partition: partition)
        }
        members[name]!.machine = machine
        perform(actions, for: name)
    }

    // MARK: Checks

    /// What is wrong with the cluster now, if anything: every partition served by exactly one live
    /// member holding a live lease at the epoch it serves, and counts within one of each other.
    func unsettled() -> [String] { problems(describing: true) }

    /// As `unsettled()`; without `describing`, stops at the first problem and names none.
    private func problems(describing: Bool) -> [String] {
        var problems: [String] = []
        var servers = [[(name: String, epoch: Int64)]](repeating: [], count: partitionCount)
        var counts: [String: Int] = [:]
        for (name, member) in members where member.alive && member.machine.state == .member {
            counts[name] = member.machine.serving.count
            for (p, epoch) in member.machine.serving { servers[p].append((name, epoch)) }
        }
        for p in 0..<partitionCount {
            guard servers[p].count == 1, let server = servers[p].first else {
                if !describing { return ["unsettled"] }
                problems.append("partition \(p) served by \(servers[p].map(\.name).sorted())")
                continue
            }
            let row = table[p]
            if row.owner != server.name || row.epoch != server.epoch || !row.leaseLive(at: now) {
                if !describing { return ["unsettled"] }
                problems.append("partition \(p) served by \(server.name) at epoch \(server.epoch), table says \(row)")
            }
        }
        if let lo = counts.values.min(), let hi = counts.values.max(), hi - lo > 1 {
            problems.append("counts \(counts.sorted { $0.key < $1.key }) are not within one")
        }
        return problems
    }

    /// Runs until `until`, checking every 100 ms whether the cluster is settled; returns since
    /// when it has been (nil: it is not).
    mutating func runUntilSettled(until: Int64) -> Int64? {
        var settledAt: Int64?
        var t = now
        while t < until {
            t = min(t + 100, until)
            run(until: t)
            if problems(describing: false).isEmpty {
                if settledAt == nil { settledAt = t }
            } else {
                settledAt = nil
            }
        }
        return settledAt
    }

    /// Partitions of dead instances or handed over that nobody took again yet.
    var untaken: [Int] { Array(awaitingTakeover.keys) + Array(awaitingRetake.keys) }
}
