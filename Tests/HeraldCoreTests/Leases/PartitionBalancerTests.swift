// The balancer's plan from a cluster view: fair shares, preferred partitions, no races, one hand-over at a time.
import HeraldCore
import HeraldTestSupport
import Testing

@Suite struct PartitionBalancerTests {
    /// A view of `count` partitions, each (owner, live lease) as given, never-owned otherwise.
    static func view(live: [String], partitions count: Int = 16, owners: [Int: (String, Bool)] = [:]) -> ClusterView {
        ClusterView(liveInstances: live, partitions: (0..<count).map { p in
            let owner = owners[p]
            return ClusterView.Partition(partition: p, epoch: owner == nil ? 0 : 3, owner: owner?.0,
                                         address: owner.map { "\($0.0):7000" }, leaseLive: owner?.1 ?? false)
        })
    }

    static func takes(_ actions: [BalanceAction]) -> [Int] {
        actions.compactMap { if case .take(let p, _) = $0 { p } else { nil } }
    }

    @Test func sharesArePOverNTheFirstByNameGettingOneMore() {
        #expect((0..<3).map { PartitionBalancer.share(index: $0, instances: 3, partitions: 16) } == [6, 5, 5])
        #expect((0..<5).map { PartitionBalancer.share(index: $0, instances: 5, partitions: 3) } == [1, 1, 1, 0, 0])
        for n in 1...7 {
            #expect((0..<n).map { PartitionBalancer.share(index: $0, instances: n, partitions: 16) }.reduce(0, +) == 16)
        }
    }

    /// Instances reading one view of a fresh database take disjoint sets covering every partition,
    /// each its share, each the partitions it prefers (p mod N).
    @Test func onAFreshDatabaseEachInstanceTakesThePartitionsItPrefers() {
        let view = Self.view(live: ["c", "a", "b"])
        let plans = ["a", "b", "c"].map { Self.takes(PartitionBalancer.plan(view: view, me: $0, serving: [])) }
        #expect(plans[0] == [0, 3, 6, 9, 12, 15])
        #expect(plans[1] == [1, 4, 7, 10, 13])
        #expect(plans[2] == [2, 5, 8, 11, 14])
        #expect(PartitionBalancer.plan(view: view, me: "a", serving: []).allSatisfy {
            if case .take(_, let e) = $0 { e == 0 } else { false }
        })
    }

    /// A live lease is never taken, even one of an instance that is no longer live (it expires).
    @Test func aLiveLeaseIsNeverTakenEvenOfADeadInstance() {
        let owners = Dictionary(uniqueKeysWithValues: (0..<16).map { ($0, ("dead", $0 < 12)) })
        let view = Self.view(live: ["a", "b"], owners: owners)
        #expect(Self.takes(PartitionBalancer.plan(view: view, me: "a", serving: [])) == [12, 14])
        #expect(Self.takes(PartitionBalancer.plan(view: view, me: "b", serving: [])) == [13, 15])
    }

    /// An instance that holds everything when a second joins hands over one partition a round,
    /// one the newcomer prefers; the newcomer has nothing free to take.
    @Test func anInstanceAboveItsShareHandsOverOneAPartitionTheShortOnePrefers() {
        let owners = Dictionary(uniqueKeysWithValues: (0..<16).map { ($0, ("a", true)) })
        let view = Self.view(live: ["a", "b"], owners: owners)
        #expect(PartitionBalancer.plan(view: view, me: "a", serving: Set(0..<16)) == [.handOver(partition: 1)])
        #expect(PartitionBalancer.plan(view: view, me: "a", serving: Set(0..<16).subtracting([1]), handingOver: [1])
                == [.handOver(partition: 3)], "the one being drained no longer counts as a's")
        #expect(PartitionBalancer.plan(view: view, me: "b", serving: []) == [])
    }

    /// Balanced within one (P mod N ≠ 0): nobody gives, nobody takes.
    @Test func atItsShareAnInstanceNeitherTakesNorGives() {
        var owners: [Int: (String, Bool)] = [:]
        for p in 0..<16 { owners[p] = (["a", "b", "c"][p % 3], true) }
        let view = Self.view(live: ["a", "b", "c"], owners: owners)
        for me in ["a", "b", "c"] {
            #expect(PartitionBalancer.plan(view: view, me: me, serving: Set(view.owned(by: me))) == [])
        }
    }

    /// The share follows the name order: "a" should own 6, so "b" with 6 of its share 5 gives one to "a".
    @Test func anInstanceWithOneMoreThanItsShareGivesItToTheOneWithOneLess() {
        let counts = ["a": 5, "b": 6, "c": 5]
        var owners: [Int: (String, Bool)] = [:]
        var p = 0
        for (name, n) in counts.sorted(by: { $0.key < $1.key }) {
            for _ in 0..<n { owners[p] = (name, true); p += 1 }
        }
        let view = Self.view(live: ["a", "b", "c"], owners: owners)
        #expect(PartitionBalancer.plan(view: view, me: "b", serving: Set(view.owned(by: "b"))).count == 1)
        #expect(PartitionBalancer.plan(view: view, me: "a", serving: Set(view.owned(by: "a"))) == [])
        #expect(PartitionBalancer.plan(view: view, me: "c", serving: Set(view.owned(by: "c"))) == [])
    }

    /// Names sort by their UTF-8 bytes, each once; two spellings of one name in Unicode are two instances.
    @Test func liveInstancesAreInByteOrder() {
        let view = ClusterView(liveInstances: ["b", "a", "B", "\u{E9}", "e\u{301}", "a"], partitions: [])
        #expect(view.liveInstances.map { Array($0.utf8) } == [[0x42], [0x61], [0x62], [0x65, 0xCC, 0x81], [0xC3, 0xA9]])
        let fresh = ClusterView(liveInstances: ["\u{E9}", "e\u{301}"], partitions: (0..<4).map {
            ClusterView.Partition(partition: $0, epoch: 0, owner: nil, address: nil, leaseLive: false)
        })
        #expect(PartitionBalancer.plan(view: fresh, me: "e\u{301}", serving: []).count == 2)
        #expect(PartitionBalancer.plan(view: fresh, me: "\u{E9}", serving: []).count == 2)
    }

    /// An instance the view does not list as live plans nothing, even on a fresh database.
    @Test func anInstanceThatIsNotLivePlansNothing() {
        #expect(PartitionBalancer.plan(view: Self.view(live: ["a"]), me: "b", serving: []) == [])
    }

    /// Partitions being taken or started count as the instance's own and are not taken again; its
    /// own live leases from an earlier run count too, and are waited for.
    @Test func partitionsInFlightCountAsOwnAndAreNotTakenTwice() {
        let view = Self.view(live: ["a", "b"], owners: [2: ("a", true)])
        #expect(Self.takes(PartitionBalancer.plan(view: view, me: "a", serving: [], acquiring: [0, 4])) == [6, 8, 10, 12, 14])
    }

    /// Seeded random views: plans of all live instances never overlap, never take a live lease,
    /// never take beyond the share, and give at most one.
    @Test func randomViewsGivePlansThatNeverOverlapNorTakeLiveLeases() {
        var rng = SeededRandom(seed: 41)
        let names = ["a", "b", "c", "d", "e"]
        for _ in 0..<500 {
            let count = Int.random(in: 1...24, using: &rng)
            let live = Array(names.shuffled(using: &rng).prefix(Int.random(in: 1...5, using: &rng)))
            var owners: [Int: (String, Bool)] = [:]
            for p in 0..<count where Bool.random(using: &rng) {
                owners[p] = ((names + ["dead"]).randomElement(using: &rng)!, Bool.random(using: &rng))
            }
            let view = Self.view(live: live, partitions: count, owners: owners)
            var taken: Set<Int> = []
            for me in view.liveInstances {
                let mine = Set(view.owned(by: me))
                let plan = PartitionBalancer.plan(view: view, me: me, serving: mine)
                let takes = Self.takes(plan)
                #expect(taken.isDisjoint(with: takes), "two instances planned to take one partition")
                taken.formUnion(takes)
                #expect(takes.allSatisfy { !view.partitions[$0].leaseLive })
                let share = PartitionBalancer.share(index: view.liveInstances.firstIndex(of: me)!, instances: view.liveInstances.count,
                                                    partitions: count)
                #expect(mine.count + takes.count <= max(share, mine.count))
                #expect(plan.count - takes.count <= 1)
                if plan.count > takes.count { #expect(mine.count > share, "only an instance above its share gives") }
            }
        }
    }
}
