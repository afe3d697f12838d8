// Which partitions a live instance takes or hands over, so that every instance plans alike and counts end within one.

/// The cluster as the database saw it in one statement, judged on the database's clock (SPEC §9):
/// the instances whose heartbeat is live and every partition's lease.
public struct ClusterView: Sendable, Equatable {
    public struct Partition: Sendable, Equatable {
        public var partition: Int
        /// The fencing token: bumped by every take.
        public var epoch: Int64
        /// The instance that took it last (nil: never owned).
        public var owner: String?
        /// Where the owner serves (host:port).
        public var address: String?
        /// The lease has not expired (and was not released): nobody may take the partition.
        public var leaseLive: Bool

        public init(partition: Int, epoch: Int64, owner: String?, address: String?, leaseLive: Bool) {
            self.partition = partition
            self.epoch = epoch
            self.owner = owner
            self.address = address
            self.leaseLive = leaseLive
        }
    }

    /// The names of the instances whose heartbeat is live, each once, in the byte order of their
    /// UTF-8 (the same on every build and platform, as the shares depend on it).
    public let liveInstances: [String]
    /// Every partition, by number.
    public let partitions: [Partition]

    public init(liveInstances: [String], partitions: [Partition]) {
        var names: [String] = []
        for name in liveInstances.sorted(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) })
        where names.last.map({ !$0.utf8.elementsEqual(name.utf8) }) ?? true {
            names.append(name)
        }
        self.liveInstances = names
        self.partitions = partitions.sorted { $0.partition < $1.partition }
    }

    /// The partitions whose lease `instance` holds, live.
    public func owned(by instance: String) -> [Int] {
        partitions.filter { $0.leaseLive && $0.owner.map { $0.utf8.elementsEqual(instance.utf8) } == true }.map(\.partition)
    }
}

/// What the balancer asks of an instance.
public enum BalanceAction: Sendable, Equatable, Hashable {
    /// Take the partition (`herald_take_partition`), which succeeds only if its epoch is still
    /// `expectedEpoch` and its lease is free.
    case take(partition: Int, expectedEpoch: Int64)
    /// Drain the partition, release its lease (`LeaseSQL.release`): a live instance below its
    /// share takes it at its next round.
    case handOver(partition: Int)
}

/// Plans one instance's round from a `ClusterView` (pure: no clock, no I/O).
///
/// Every live instance computes the same shares from the same view: with P partitions and N live
/// instances sorted by name, the instance at index i should own `P / N`, plus one if `i < P % N`.
/// Partition p prefers the instance at index `p % N` (each instance is preferred by exactly as
/// many partitions as its share). Free partitions (lease expired or released) are dealt out to the
/// instances below their share, preferred ones first, in one deterministic pass that every
/// instance computes alike; each takes only what the pass gave it, so instances reading the same
/// view never race for a partition. An instance above its share hands one partition over per
/// round, and only while someone would still be short after every free partition is dealt: a
/// handed-over partition always has a taker, and nobody ever goes below its share by giving, so
/// partitions never bounce. A partition whose lease is live is never taken.
public enum PartitionBalancer {
    /// How many partitions the instance at `index` of `instances` live ones (sorted by name) should own.
    public static func share(index: Int, instances: Int, partitions: Int) -> Int {
        precondition(instances > 0 && index >= 0 && index < instances)
        return partitions / instances + (index < partitions % instances ? 1 : 0)
    }

    /// The index (among the live instances sorted by name) of the instance partition `partition` prefers.
    public static func preferredIndex(of partition: Int, instances: Int) -> Int {
        partition % instances
    }

    /// One round of `me`'s plan: the takes to send and at most one hand-over.
    ///
    /// - `serving`: partitions `me` serves (started; the only ones it may hand over).
    /// - `acquiring`: partitions `me` is taking or starting (its own, not yet serving).
    /// - `handingOver`: partitions `me` is draining and releasing (no longer counted as its own).
    ///
    /// An instance the view does not list as live (its heartbeat was not written) plans nothing:
    /// the others do not count it, so whatever it took would unbalance them.
    public static func plan(view: ClusterView, me: String, serving: Set<Int>, acquiring: Set<Int> = [],
                            handingOver: Set<Int> = []) -> [BalanceAction] {
        let live = view.liveInstances
        // Names are compared by their bytes, as the database compares them.
        let indexOf = Dictionary(uniqueKeysWithValues: live.enumerated().map { (Array($1.utf8), $0) })
        guard let myIndex = indexOf[Array(me.utf8)] else { return [] }
        let n = live.count
        let mine = serving.union(acquiring)

        // Counts from the view (a live lease of an instance that is not live counts for nobody and
        // is not free: it expires), with this instance's own partitions as it knows them.
        var counts = [Int](repeating: 0, count: n)
        var free: [ClusterView.Partition] = []
        for p in view.partitions where !mine.contains(p.partition) && !handingOver.contains(p.partition) {
            if p.leaseLive {
                if let owner = p.owner, let i = indexOf[Array(owner.utf8)] { counts[i] += 1 }
            } else {
                free.append(p)
            }
        }
        counts[myIndex] += mine.count
        let shares = (0..<n).map { share(index: $0, instances: n, partitions: view.partitions.count) }

        // Deal the free partitions: each to the instance it prefers while that one is short, then
        // the rest to the next short instance after its preferred one, by name.
        var short = (0..<n).map { max(0, shares[$0] - counts[$0]) }
        var dealt = [Int: Int]()  // partition → instance index
        for p in free {
            let j = preferredIndex(of: p.partition, instances: n)
            if short[j] > 0 { dealt[p.partition] = j; short[j] -= 1 }
        }
        for p in free where dealt[p.partition] == nil {
            let first = preferredIndex(of: p.partition, instances: n)
            if let j = (0..<n).lazy.map({ (first + $0) % n }).first(where: { short[$0] > 0 }) {
                dealt[p.partition] = j
                short[j] -= 1
            }
        }
        var actions: [BalanceAction] = free.filter { dealt[$0.partition] == myIndex }
            .map { .take(partition: $0.partition, expectedEpoch: $0.epoch) }

        // Above the share while someone stays short after the deal: give one partition, preferably
        // one a short instance prefers, else one this instance does not prefer.
        if counts[myIndex] > shares[myIndex], short.contains(where: { $0 > 0 }) {
            let candidates = serving.subtracting(handingOver).sorted()
            func rank(_ p: Int) -> Int {
                let j = preferredIndex(of: p, instances: n)
                return short[j] > 0 ? 0 : j != myIndex ? 1 : 2
            }
            if let best = candidates.min(by: { (rank($0), $0) < (rank($1), $1) }) {
                actions.append(.handOver(partition: best))
            }
        }
        return actions
    }
}
