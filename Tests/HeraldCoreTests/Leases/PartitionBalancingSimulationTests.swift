// SPEC §9 over many seeded histories: 1–5 instances over 16 partitions joining, dying and leaving; the checker and what it catches.
import HeraldCore
import HeraldTestSupport
import Testing

@Suite struct PartitionBalancingSimulationTests {
    static let names = ["ash", "birch", "cedar", "elm", "fir", "oak", "pine"]

    struct Outcome {
        var violations: [String] = []
        var longestSettle: Int64 = 0
        var longestTakeover: Int64 = 0
        var longestRetake: Int64 = 0
        var takes = 0
        var refusedTakes = 0
        var zombieLosses = 0
        var unwrittenHeartbeats = 0
        var happened: [String: Int] = [:]
    }

    /// One seeded history: 1–5 instances start at random moments, then `phases` times one joins,
    /// dies (`kill -9`), is paused for 3×TTL (a zombie) or stops gracefully, keeping 1–5 alive;
    /// each phase runs long enough to settle (2×TTL for a death, then a round per partition to
    /// move) and is checked at its end.
    static func history(seed: UInt64, phases: Int = 8, planner: ClusterSimulation.Planner? = nil) -> Outcome {
        var sim = planner.map { ClusterSimulation(seed: seed, planner: $0) } ?? ClusterSimulation(seed: seed)
        var rng = SeededRandom(seed: seed ^ 0x5EED)
        var outcome = Outcome()
        let phaseLength = 2 * sim.ttl + Int64(sim.partitionCount + 4) * sim.tick

        func settle(_ what: String, after pause: Int64 = 0) {
            let start = sim.now
            let settledAt = sim.runUntilSettled(until: start + pause + phaseLength)
            let problems = sim.unsettled()
            if !problems.isEmpty || settledAt == nil {
                outcome.violations.append("seed \(seed), after \(what): not settled: \(problems)")
            } else if let settledAt {
                outcome.longestSettle = max(outcome.longestSettle, settledAt - start)
            }
            if !sim.untaken.isEmpty {
                outcome.violations.append("seed \(seed), after \(what): partitions \(sim.untaken.sorted()) were never taken again")
            }
        }

        let initial = Int.random(in: 1...5, using: &rng)
        for name in names.shuffled(using: &rng).prefix(initial) {
            sim.run(until: sim.now + Int64.random(in: 0...sim.tick, using: &rng))
            sim.join(name)
        }
        settle("\(initial) started")
        for _ in 0..<phases {
            let alive = sim.alive
            let roll = Int.random(in: 0..<4, using: &rng)
            if alive.count < 5, roll == 0 || alive.count == 1 {
                let name = names.filter { !alive.contains($0) }.randomElement(using: &rng)!
                sim.join(name)
                outcome.happened["join", default: 0] += 1
                settle("\(name) joined")
            } else if roll == 1 {
                let name = alive.randomElement(using: &rng)!
                sim.kill(name)
                outcome.happened["kill", default: 0] += 1
                settle("\(name) was killed")
            } else if roll == 2 {
                let name = alive.randomElement(using: &rng)!
                sim.pause(name, for: 3 * sim.ttl)
                outcome.happened["pause", default: 0] += 1
                settle("\(name) was paused for 3×TTL", after: 3 * sim.ttl)
            } else {
                let name = alive.randomElement(using: &rng)!
                sim.stop(name)
                outcome.happened["stop", default: 0] += 1
                settle("\(name) stopped")
            }
        }
        outcome.violations += sim.violations.map { "seed \(seed): \($0)" }
        outcome.longestTakeover = sim.longestTakeover
        outcome.longestRetake = sim.longestRetake
        outcome.takes = sim.takes
        outcome.refusedTakes = sim.refusedTakes
        outcome.zombieLosses = sim.zombieLosses
        outcome.unwrittenHeartbeats = sim.unwrittenHeartbeats
        return outcome
    }

    /// Every partition ends owned by exactly one live instance, counts within one of each other;
    /// a zombie's partitions are taken while it sleeps and lost when it wakes;
    /// a dead instance's partitions are taken within 2×TTL of their last renewal; a handed-over
    /// partition is taken again within a round; no (partition, epoch) is ever taken twice; no
    /// instance plans to take a live lease or loses one it renews.
    @Test func seededHistoriesOfJoinsDeathsAndGracefulStopsKeepEveryPromise() {
        var worst = Outcome()
        for seed in UInt64(1)...24 {
            let outcome = Self.history(seed: seed)
            #expect(outcome.violations.isEmpty, "\(outcome.violations.prefix(5))")
            worst.longestSettle = max(worst.longestSettle, outcome.longestSettle)
            worst.longestTakeover = max(worst.longestTakeover, outcome.longestTakeover)
            worst.longestRetake = max(worst.longestRetake, outcome.longestRetake)
            worst.takes += outcome.takes
            worst.refusedTakes += outcome.refusedTakes
            worst.zombieLosses += outcome.zombieLosses
            worst.unwrittenHeartbeats += outcome.unwrittenHeartbeats
            worst.happened.merge(outcome.happened, uniquingKeysWith: +)
        }
        print("""
            Balancing, 24 seeded histories (P = 16, TTL 3,000 ms, \(worst.happened)): settled within \(worst.longestSettle) ms, \
            dead instances' partitions taken within \(worst.longestTakeover) ms of their last renewal, handed-over ones within \
            \(worst.longestRetake) ms, \(worst.refusedTakes) of \(worst.takes + worst.refusedTakes) takes refused
            """)
        #expect(["join", "kill", "pause", "stop"].allSatisfy { worst.happened[$0, default: 0] >= 10 }, "\(worst.happened)")
        #expect(worst.zombieLosses > 0 && worst.unwrittenHeartbeats > 0)
        // TTL 3,000 ms: a takeover needs the lease and the heartbeat expired, then a round.
        #expect(worst.longestTakeover <= 2 * 3_000)
        #expect(worst.longestRetake <= 3_000, "a handed-over partition is taken at the next round, not after a TTL")
        #expect(worst.refusedTakes * 10 <= worst.takes, "instances planning from the same view rarely race: \(worst.refusedTakes) of \(worst.takes + worst.refusedTakes) takes refused")
    }

    /// A planner that ignores whether a lease is live is caught, though the take itself would be
    /// refused by the table.
    @Test func theCheckerCatchesAPlannerThatIgnoresLiveLeases() {
        let ignoresLeases: ClusterSimulation.Planner = { view, me, serving, acquiring, handingOver in
            let blind = ClusterView(liveInstances: view.liveInstances, partitions: view.partitions.map {
                var p = $0
                p.leaseLive = false
                return p
            })
            return PartitionBalancer.plan(view: blind, me: me, serving: serving, acquiring: acquiring, handingOver: handingOver)
        }
        let violations = (UInt64(1)...4).flatMap { Self.history(seed: $0, phases: 4, planner: ignoresLeases).violations }
        #expect(violations.contains { $0.contains("whose lease was live") }, "\(violations.prefix(3))")
    }

    /// A greedy planner (every free partition, never a hand-over) leaves the first instance with
    /// everything: the checker says the counts are not within one.
    @Test func theCheckerCatchesAGreedyPlanner() {
        let greedy: ClusterSimulation.Planner = { view, me, serving, acquiring, handingOver in
            guard view.liveInstances.contains(me) else { return [] }
            return view.partitions.filter { !$0.leaseLive && !serving.contains($0.partition) && !acquiring.contains($0.partition)
                && !handingOver.contains($0.partition) }
                .map { .take(partition: $0.partition, expectedEpoch: $0.epoch) }
        }
        let violations = (UInt64(1)...4).flatMap { Self.history(seed: $0, phases: 4, planner: greedy).violations }
        #expect(violations.contains { $0.contains("are not within one") }, "\(violations.prefix(3))")
    }

    /// A kill right after a start (the dead one's leases just taken) and a graceful stop of the
    /// last two but one: the survivor ends with every partition.
    @Test func theLastSurvivorEndsWithEveryPartition() {
        var sim = ClusterSimulation(seed: 99)
        for name in ["ash", "birch", "cedar"] { sim.join(name) }
        _ = sim.runUntilSettled(until: 10_000)
        #expect(sim.unsettled().isEmpty)
        sim.kill("ash")
        sim.stop("birch")
        _ = sim.runUntilSettled(until: 30_000)
        #expect(sim.unsettled().isEmpty, "\(sim.unsettled())")
        #expect(sim.members["cedar"]?.machine.serving.count == 16)
        #expect(sim.members["birch"]?.machine.state == .left)
        #expect(sim.violations.isEmpty, "\(sim.violations)")
    }
}
