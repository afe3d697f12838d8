// An instance's membership of the cluster: heartbeats, rounds of the balancer, takes, hand-overs, a graceful leave.

/// One `herald serve` instance's side of SPEC §9's membership, without I/O: the service performs
/// the actions it returns and reports their outcomes back as events.
///
/// Every tick (a third of the TTL) the instance writes its heartbeat, reads the cluster view and
/// plans a round with `PartitionBalancer`: it takes free partitions while below its share and
/// hands one over while above it. A take that succeeds becomes `startServing` (the service
/// rebuilds the partition from snapshot + log and says `partitionStarted`); the lease of a served
/// partition is renewed by its own `LeaseStateMachine`. A heartbeat that cannot be written stops
/// neither the serving nor the round: the epoch in every append fences an instance that lost a
/// partition, and only the database (a refused renewal, a fenced append: `partitionLost`) takes a
/// partition away. A stop hands every served partition over, waits for takes and starts in flight
/// to settle (handing those over too), and then leaves.
public struct MembershipStateMachine: Sendable, Equatable {
    public enum State: Sendable, Equatable {
        /// Not started.
        case idle
        /// Heartbeat sent; no view read yet.
        case joining
        /// A member: rounds every tick.
        case member
        /// Stopping: handing everything over, then leaving.
        case leaving
        /// Left the cluster (the `leave` action was returned): nothing more to do.
        case left
    }

    public enum Action: Sendable, Equatable {
        /// Write the heartbeat (`ClusterSQL.heartbeat`), then report `heartbeatCompleted`.
        case heartbeat
        /// Read the cluster view (`ClusterSQL.view`), then report `viewRead` or `viewReadFailed`.
        case readView
        /// Take the partition (`ClusterSQL.take`), then report `takeCompleted` with the new epoch or nil.
        case take(partition: Int, expectedEpoch: Int64)
        /// Serve the partition at `epoch`: rebuild it, renew its lease, then report `partitionStarted`
        /// (or `partitionLost` if it cannot be started).
        case startServing(partition: Int, epoch: Int64)
        /// Give up a lease taken while stopping and never served (`LeaseSQL.release`); no report.
        case release(partition: Int, epoch: Int64)
        /// Drain the served partition (`goodbye` to its requests), release its lease
        /// (`LeaseSQL.release`), then report `handOverCompleted`. Always names a started partition.
        case handOver(partition: Int)
        /// Delete this instance's row (`ClusterSQL.leave`): the last action; the instance may exit after it.
        case leave
        /// Call `tickDue` after this many milliseconds.
        case armTick(milliseconds: Int64)
    }

    public let instance: String
    public let ttlMilliseconds: Int64
    public private(set) var state: State = .idle
    /// Partitions served (started), with their epochs.
    public private(set) var serving: [Int: Int64] = [:]
    /// Partitions taken and being started, with their epochs.
    public private(set) var starting: [Int: Int64] = [:]
    /// Partitions whose take is in flight.
    public private(set) var taking: Set<Int> = []
    /// Partitions being drained and released, with their epochs.
    public private(set) var handingOver: [Int: Int64] = [:]
    /// When the round in flight (heartbeat, then view) began; nil when none is.
    private var roundStartedAt: Int64?
    /// Until when the last heartbeat written keeps this instance live, by its own clock.
    public private(set) var heartbeatValidUntil: Int64?
    /// Partitions whose row was locked when this instance tried to take them, with when (by its
    /// clock) a round may try again.
    public private(set) var takesDeferred: [Int: Int64] = [:]

    public init(instance: String, ttlMilliseconds: Int64) {
        precondition(ttlMilliseconds > 0)
        self.instance = instance
        self.ttlMilliseconds = ttlMilliseconds
    }

    /// A round every third of the TTL: a heartbeat written at each keeps the instance live through
    /// two failed ones.
    public var tickMilliseconds: Int64 { max(ttlMilliseconds / 3, 1) }

    /// The epoch this instance holds `partition` at (starting, serving or handing over).
    public func epoch(of partition: Int) -> Int64? {
        serving[partition] ?? starting[partition] ?? handingOver[partition]
    }

    /// By this instance's clock, its heartbeat may have run out (the others may no longer count it).
    public func heartbeatMayHaveExpired(now: Int64) -> Bool {
        heartbeatValidUntil.map { now >= $0 } ?? true
    }

    /// The service started at `now` (a monotonic clock in milliseconds).
    public mutating func startRequested(now: Int64) -> [Action] {
        guard state == .idle else { return [] }
        state = .joining
        roundStartedAt = now
        return [.heartbeat, .armTick(milliseconds: tickMilliseconds)]
    }

    /// The tick armed by `armTick` fired at `now`. A round still in flight (its heartbeat or view
    /// not answered) is let be, unless it began a whole TTL ago.
    public mutating func tickDue(now: Int64) -> [Action] {
        guard state == .joining || state == .member else { return [] }
        if let began = roundStartedAt, now - began < ttlMilliseconds {
            return [.armTick(milliseconds: tickMilliseconds)]
        }
        roundStartedAt = now
        return [.heartbeat, .armTick(milliseconds: tickMilliseconds)]
    }

    /// The heartbeat sent by the round in flight was written (`ok`) or not. One not written keeps
    /// every partition served, and the round goes on: the view says whether the last heartbeat
    /// written still counts (an instance the view does not list plans nothing).
    public mutating func heartbeatCompleted(ok: Bool) -> [Action] {
        guard state == .joining || state == .member, let began = roundStartedAt else { return [] }
        if ok { heartbeatValidUntil = max(heartbeatValidUntil ?? began, began + ttlMilliseconds) }
        return [.readView]
    }

    /// The cluster view was read: plan the round with `PartitionBalancer`.
    public mutating func viewRead(_ view: ClusterView) -> [Action] {
        viewRead(view, plannedBy: PartitionBalancer.plan)
    }

    /// As `viewRead(_:)`, with another planner (to test that checkers catch a faulty one).
    public mutating func viewRead(
        _ view: ClusterView,
        plannedBy plan: (_ view: ClusterView, _ me: String, _ serving: Set<Int>, _ acquiring: Set<Int>, _ handingOver: Set<Int>) -> [BalanceAction]
    ) -> [Action] {
        guard state == .joining || state == .member else { return [] }
        let roundStart = roundStartedAt
        roundStartedAt = nil
        state = .member
        let planned = plan(view, instance, Set(serving.keys), taking.union(starting.keys), Set(handingOver.keys))
        var actions: [Action] = []
        for step in planned {
            switch step {
            case .take(let partition, let expectedEpoch):
                guard epoch(of: partition) == nil, !taking.contains(partition) else { continue }
                if let until = takesDeferred[partition], let at = roundStart, at < until { continue }
                takesDeferred[partition] = nil
                taking.insert(partition)
                actions.append(.take(partition: partition, expectedEpoch: expectedEpoch))
            case .handOver(let partition):
                guard let epoch = serving.removeValue(forKey: partition) else { continue }
                handingOver[partition] = epoch
                actions.append(.handOver(partition: partition))
            }
        }
        return actions
    }

    /// The view could not be read: nothing this round.
    public mutating func viewReadFailed() -> [Action] {
        guard state == .joining || state == .member else { return [] }
        roundStartedAt = nil
        return []
    }

    /// The take of `partition` committed with its new `epoch`, or found it not takeable (nil).
    public mutating func takeCompleted(partition: Int, epoch: Int64?) -> [Action] {
        guard taking.remove(partition) != nil else { return [] }
        guard let epoch else { return finishLeavingIfDone() }
        if state == .leaving {
            return [.release(partition: partition, epoch: epoch)] + finishLeavingIfDone()
        }
        starting[partition] = epoch
        return [.startServing(partition: partition, epoch: epoch)]
    }

    /// The take of `partition`, sent at `now`, gave up waiting for the partition's row: another
    /// session holds it, typically an owner paused in the middle of an append whose lease ran out
    /// meanwhile (it may sleep for long). Nothing was taken; rounds do not try the partition again
    /// for a tick, so that they do not spend their time waiting on that lock.
    public mutating func takeFoundRowLocked(partition: Int, now: Int64) -> [Action] {
        guard taking.contains(partition) else { return [] }
        takesDeferred[partition] = now + tickMilliseconds
        return takeCompleted(partition: partition, epoch: nil)
    }

    /// The service serves `partition` (rebuilt, its lease renewed from now on).
    public mutating func partitionStarted(partition: Int) -> [Action] {
        guard let epoch = starting.removeValue(forKey: partition) else { return [] }
        if state == .leaving {
            handingOver[partition] = epoch
            return [.handOver(partition: partition)]
        }
        serving[partition] = epoch
        return []
    }

    /// The service no longer holds `partition`: its renewal was refused, an append was fenced, or
    /// it could not be started.
    public mutating func partitionLost(partition: Int) -> [Action] {
        let held = serving.removeValue(forKey: partition) ?? starting.removeValue(forKey: partition)
            ?? handingOver.removeValue(forKey: partition)
        guard held != nil else { return [] }
        return finishLeavingIfDone()
    }

    /// `partition` was drained and its lease released.
    public mutating func handOverCompleted(partition: Int) -> [Action] {
        guard handingOver.removeValue(forKey: partition) != nil else { return [] }
        return finishLeavingIfDone()
    }

    /// A graceful stop: hand every served partition over, then leave.
    public mutating func stopRequested() -> [Action] {
        switch state {
        case .idle:
            state = .left
            return []
        case .joining, .member:
            state = .leaving
            roundStartedAt = nil
            let partitions = serving.keys.sorted()
            for p in partitions { handingOver[p] = serving[p] }
            serving = [:]
            return partitions.map { .handOver(partition: $0) } + finishLeavingIfDone()
        case .leaving, .left:
            return []
        }
    }

    private mutating func finishLeavingIfDone() -> [Action] {
        guard state == .leaving, taking.isEmpty, starting.isEmpty, serving.isEmpty, handingOver.isEmpty else { return [] }
        state = .left
        return [.leave]
    }
}
