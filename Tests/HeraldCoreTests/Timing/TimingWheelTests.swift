// Targeted rules of the timing wheel: never early, far jumps, ties, handles, nextDeadline, bulk load.
import HeraldCore
import HeraldTestSupport
import Testing

@Suite struct TimingWheelTests {
    static let start = Instant(millisecondsSinceEpoch: 1_798_761_600_000)  // 2027-01-01T00:00:00Z
    static let day: Int64 = 86_400_000
    static let year: Int64 = 365 * day

    static func at(_ offset: Int64) -> Instant { start.adding(.init(milliseconds: offset)) }

    /// Advances and returns what fired, as (offset from start, payload).
    static func drain(_ wheel: inout TimingWheel, to offset: Int64) -> [FiredPair] {
        var out: [FiredPair] = []
        wheel.advance(to: at(offset)) {
            out.append(FiredPair(deadline: $0.millisecondsSinceEpoch - start.millisecondsSinceEpoch, payload: $1))
        }
        return out
    }

    @Test(arguments: [Int64(1), 3, 10, 1000])
    func timerFiresExactlyWhenNowReachesDeadlineNeverBefore(tick: Int64) {
        var wheel = TimingWheel(start: Self.start, tickMilliseconds: tick)
        var rng = SeededRandom(seed: 42)
        var pending: [Int64: Int] = [:]
        for p in 0..<2_000 {
            let offset = Int64(rng.next() % 20_000) + 1
            wheel.schedule(at: Self.at(offset), payload: UInt64(p))
            pending[offset, default: 0] += 1
        }
        var now: Int64 = 0
        while now < 20_001 {
            now += Int64(rng.next() % 7)
            for f in Self.drain(&wheel, to: now) {
                #expect(f.deadline <= now, "fired \(f.deadline) at \(now)")
                pending[f.deadline]! -= 1
            }
            // Everything due has fired.
            #expect(pending.allSatisfy { $0.key > now || $0.value == 0 }, "a due timer is still pending at \(now)")
        }
        #expect(wheel.count == 0)
    }

    @Test func nineYearTimerFiresAtItsDeadlineAndNotAMillisecondEarlier() {
        var wheel = TimingWheel(start: Self.start)
        let far = 9 * Self.year + 12_345
        wheel.schedule(at: Self.at(far), payload: 1)
        wheel.schedule(at: Self.at(far + 1), payload: 2)
        wheel.schedule(at: Self.at(10 * Self.year), payload: 3)
        #expect(wheel.nextDeadline == Self.at(far))
        #expect(Self.drain(&wheel, to: far - 1).isEmpty)
        #expect(Self.drain(&wheel, to: far) == [FiredPair(deadline: far, payload: 1)])
        #expect(wheel.nextDeadline == Self.at(far + 1))
        #expect(Self.drain(&wheel, to: 11 * Self.year) == [FiredPair(deadline: far + 1, payload: 2), FiredPair(deadline: 10 * Self.year, payload: 3)])
    }

    @Test func jumpingAMonthFiresEverythingDueInDeadlineOrder() {
        var wheel = TimingWheel(start: Self.start)
        var rng = SeededRandom(seed: 7)
        var expected: [FiredPair] = []
        for p in 0..<20_000 {
            let offset = Int64(rng.next() % UInt64(40 * Self.day))
            wheel.schedule(at: Self.at(offset), payload: UInt64(p))
            if offset <= 30 * Self.day { expected.append(FiredPair(deadline: offset, payload: UInt64(p))) }
        }
        expected.sort { ($0.deadline, $0.payload) < ($1.deadline, $1.payload) }
        #expect(Self.drain(&wheel, to: 30 * Self.day) == expected)
        #expect(wheel.count == 20_000 - expected.count)
    }

    @Test func timersDueInOneTickFireByAscendingPayloadWhateverTheScheduleOrder() {
        var wheel = TimingWheel(start: Self.start)
        let eight = 8 * 3_600_000 as Int64
        for p: UInt64 in [5, 3, 9, 1, 3, 0, 7] { wheel.schedule(at: Self.at(eight), payload: p) }
        wheel.schedule(at: Self.at(eight - 1), payload: 100)
        let fired = Self.drain(&wheel, to: eight)
        #expect(fired.map(\.payload) == [100, 0, 1, 3, 3, 5, 7, 9])
    }

    @Test func cancellingAfterFireOrTwiceIsHarmlessAndReturnsFalse() {
        var wheel = TimingWheel(start: Self.start)
        let a = wheel.schedule(at: Self.at(10), payload: 1)
        let b = wheel.schedule(at: Self.at(20), payload: 2)
        #expect(Self.drain(&wheel, to: 10).count == 1)
        let afterFire = wheel.cancel(a)
        let first = wheel.cancel(b)
        let second = wheel.cancel(b)
        #expect(afterFire == false)
        #expect(first == true)
        #expect(second == false)
        #expect(wheel.count == 0)
        #expect(Self.drain(&wheel, to: 100).isEmpty)
    }

    @Test func reusedSlotIsNotCancelledThroughTheOldHandle() {
        var wheel = TimingWheel(start: Self.start)
        let old = wheel.schedule(at: Self.at(5), payload: 1)
        let cancelled = wheel.cancel(old)
        #expect(cancelled)
        #expect(Self.drain(&wheel, to: 9).isEmpty)  // the cancelled node is reclaimed with its slot...
        let new = wheel.schedule(at: Self.at(10), payload: 2)  // ...and then handed out again
        #expect(new.index == old.index, "the free list should hand the slot back")
        #expect(new != old)
        let staleCancel = wheel.cancel(old)
        #expect(staleCancel == false)
        #expect(Self.drain(&wheel, to: 10) == [FiredPair(deadline: 10, payload: 2)])
        let afterFire = wheel.cancel(new)
        #expect(afterFire == false)
    }

    @Test func pastDeadlineFiresOnTheNextAdvanceEvenWithoutMovingTime() {
        var wheel = TimingWheel(start: Self.start)
        _ = Self.drain(&wheel, to: 1_000)
        wheel.schedule(at: Self.at(400), payload: 2)
        wheel.schedule(at: Self.at(1_000), payload: 3)
        wheel.schedule(at: Self.at(-5 * Self.year), payload: 1)
        #expect(wheel.nextDeadline == Self.at(-5 * Self.year))
        #expect(Self.drain(&wheel, to: 1_000).map(\.payload) == [1, 2, 3])
        #expect(wheel.nextDeadline == nil)
    }

    @Test func advancingToAnEarlierInstantDoesNotMoveTimeBack() {
        var wheel = TimingWheel(start: Self.start)
        _ = Self.drain(&wheel, to: 500)
        wheel.schedule(at: Self.at(450), payload: 1)
        wheel.schedule(at: Self.at(501), payload: 2)
        #expect(Self.drain(&wheel, to: 100).map(\.payload) == [1])
        #expect(wheel.now == Self.at(500))
        #expect(Self.drain(&wheel, to: 501).map(\.payload) == [2])
    }

    @Test func extremeDeadlinesAreHeldAndFireInOrder() {
        var wheel = TimingWheel(start: Self.start)
        wheel.schedule(at: Instant(millisecondsSinceEpoch: .max), payload: 2)
        wheel.schedule(at: Instant(millisecondsSinceEpoch: .max - 1), payload: 1)
        wheel.schedule(at: Instant(millisecondsSinceEpoch: .min), payload: 0)
        var fired: [UInt64] = []
        wheel.advance(to: Self.start) { fired.append($1) }
        #expect(fired == [0])
        #expect(wheel.nextDeadline == Instant(millisecondsSinceEpoch: .max - 1))
        wheel.advance(to: Instant(millisecondsSinceEpoch: .max - 1)) { fired.append($1) }
        #expect(fired == [0, 1])
        wheel.advance(to: Instant(millisecondsSinceEpoch: .max)) { fired.append($1) }
        #expect(fired == [0, 1, 2])
    }

    @Test func nextDeadlineIsExactWithoutCancellationsAndNeverLateWithThem() {
        var wheel = TimingWheel(start: Self.start)
        var heap = TimerHeap(start: Self.start)
        var rng = SeededRandom(seed: 99)
        #expect(wheel.nextDeadline == nil)
        var handles: [(TimerHandle, TimerHandle)] = []
        for p in 0..<5_000 {
            let at = Self.at(Int64(rng.next() % UInt64(Self.year)))
            handles.append((wheel.schedule(at: at, payload: UInt64(p)), heap.schedule(at: at, payload: UInt64(p))))
            #expect(wheel.nextDeadline == heap.nextDeadline)
        }
        var now: Int64 = 0
        while let next = heap.nextDeadline {
            // Cancel a few timers, then step to the wheel's (possibly early) next deadline.
            for _ in 0..<3 where !handles.isEmpty {
                let i = Int(rng.next() % UInt64(handles.count))
                let a = wheel.cancel(handles[i].0), b = heap.cancel(handles[i].1)
                #expect(a == b)
            }
            guard let w = wheel.nextDeadline, let h = heap.nextDeadline else {
                #expect(wheel.nextDeadline == heap.nextDeadline)
                break
            }
            #expect(w <= h, "wheel's next deadline is later than the earliest timer")
            #expect(w.millisecondsSinceEpoch >= Self.start.millisecondsSinceEpoch + now || w <= next)
            now = w.millisecondsSinceEpoch - Self.start.millisecondsSinceEpoch
            var a: [UInt64] = [], b: [UInt64] = []
            wheel.advance(to: w) { a.append($1) }
            heap.advance(to: w) { b.append($1) }
            #expect(a == b)
        }
        #expect(wheel.count == 0 && wheel.nextDeadline == nil)
    }

    @Test func nextDeadlineOfANearTimerIsItsExactDeadline() {
        var wheel = TimingWheel(start: Self.start)
        wheel.schedule(at: Self.at(3_600_000), payload: 1)
        let early = wheel.schedule(at: Self.at(60_000), payload: 2)
        #expect(wheel.nextDeadline == Self.at(60_000))
        wheel.cancel(early)
        #expect(wheel.nextDeadline! <= Self.at(3_600_000))
        _ = Self.drain(&wheel, to: 60_000)
        #expect(wheel.nextDeadline == Self.at(3_600_000))
    }

    @Test func scheduleAllFiresExactlyLikeIndividualSchedules() {
        var rng = SeededRandom(seed: 5)
        let timers = (0..<50_000).map { _ in
            (Self.at(Int64(rng.next() % UInt64(8 * Self.day)) - Self.day), rng.next() % 1_000)
        }
        var one = TimingWheel(start: Self.start)
        var bulk = TimingWheel(start: Self.start)
        for (d, p) in timers { one.schedule(at: d, payload: p) }
        bulk.scheduleAll(timers.reversed())
        #expect(bulk.count == timers.count)
        #expect(bulk.nextDeadline == one.nextDeadline)
        for step in [Self.day / 3, 1, 2 * Self.day, 7 * Self.day] {
            let a = Self.drain(&one, to: step), b = Self.drain(&bulk, to: step)
            #expect(a == b)
        }
        #expect(one.count == 0 && bulk.count == 0)
    }

    @Test func steadyStateReusesStorageInsteadOfGrowing() {
        var wheel = TimingWheel(start: Self.start)
        var rng = SeededRandom(seed: 11)
        var now: Int64 = 0
        func cycle() {
            var handles: [TimerHandle] = []
            for p in 0..<10_000 {
                handles.append(wheel.schedule(at: Self.at(now + Int64(rng.next() % 60_000)), payload: UInt64(p)))
            }
            for h in handles.prefix(3_000) { wheel.cancel(h) }
            now += 60_000
            _ = Self.drain(&wheel, to: now)
        }
        cycle()
        let bytes = wheel.storageBytes
        for _ in 0..<5 { cycle() }
        #expect(wheel.count == 0)
        #expect(wheel.storageBytes == bytes, "storage grew in steady state")
    }

    @Test func liveTimerCostsAtMost32BytesOnceCapacityIsReserved() {
        var wheel = TimingWheel(start: Self.start)
        let n = 200_000
        wheel.reserveCapacity(n)
        var rng = SeededRandom(seed: 3)
        for p in 0..<n { wheel.schedule(at: Self.at(Int64(rng.next() % UInt64(7 * Self.day))), payload: UInt64(p)) }
        let perTimer = Double(wheel.storageBytes) / Double(n)
        #expect(perTimer <= 32, "\(perTimer) bytes per timer")
    }

    @Test func cancelledFarFutureTimersAreReclaimedBeforeTheWheelGrows() {
        var wheel = TimingWheel(start: Self.start)
        var rng = SeededRandom(seed: 17)
        var expected: [FiredPair] = []
        var handles: [TimerHandle] = []
        for p in 0..<20_000 {
            handles.append(wheel.schedule(at: Self.at(Self.year + Int64(rng.next() % UInt64(Self.year))), payload: UInt64(p)))
        }
        let initial = wheel.storageBytes
        var bytes = 0
        for round in 1...5 {
            // Cancel everything (far future: no slot is processed, nodes stay until compaction)...
            for h in handles { wheel.cancel(h) }
            #expect(wheel.count == 0)
            handles.removeAll()
            // ...then schedule as many again: the wheel must reuse them, not grow.
            for p in 0..<20_000 {
                let offset = Self.year + Int64(rng.next() % UInt64(Self.year))
                handles.append(wheel.schedule(at: Self.at(offset), payload: UInt64(round * 100_000 + p)))
                if round == 5 { expected.append(FiredPair(deadline: offset, payload: UInt64(round * 100_000 + p))) }
            }
            #expect(wheel.count == 20_000)
            if round == 1 {
                // Only the release batch and its sort scratch (4 bytes a node, array doubling) may
                // appear; a grown slab would add at least 24 bytes x 20k.
                bytes = wheel.storageBytes
                #expect(bytes - initial <= 3 * 4 * 20_000 + 4_096, "the node slab grew: \(bytes - initial) bytes")
            }
            #expect(wheel.storageBytes == bytes, "round \(round): storage grew")
        }
        expected.sort { ($0.deadline, $0.payload) < ($1.deadline, $1.payload) }
        #expect(Self.drain(&wheel, to: 3 * Self.year) == expected)
    }

    @Test(arguments: [Int64(1), 1000])
    func largeSameTickBatchesFireInDeadlineThenPayloadOrder(tick: Int64) {
        // Big enough to take the radix-sort path; full-range payloads and mixed deadlines
        // (overdue timers of many past instants, including negative ones, plus one tick).
        var wheel = TimingWheel(start: Self.start, tickMilliseconds: tick)
        var rng = SeededRandom(seed: 23)
        var expected: [FiredPair] = []
        _ = Self.drain(&wheel, to: 10_000)
        for _ in 0..<5_000 {
            let payload = rng.next()
            wheel.schedule(at: Self.at(12_000), payload: payload)
            expected.append(FiredPair(deadline: 12_000, payload: payload))
            let past = Int64(rng.next() % 3_000_000_000_000) - 2_000_000_000_000
            let overduePayload = rng.next() % 4
            wheel.schedule(at: Self.at(min(past, 10_000)), payload: overduePayload)
            expected.append(FiredPair(deadline: min(past, 10_000), payload: overduePayload))
        }
        expected.sort { ($0.deadline, $0.payload) < ($1.deadline, $1.payload) }
        #expect(Self.drain(&wheel, to: 12_000) == expected)
    }

    @Test func copiesOfAWheelAreIndependentValues() {
        var original = TimingWheel(start: Self.start)
        let a = original.schedule(at: Self.at(10), payload: 1)
        original.schedule(at: Self.at(20), payload: 2)
        var copy = original
        let cancelled = copy.cancel(a)
        #expect(cancelled)
        copy.schedule(at: Self.at(5), payload: 3)
        #expect(Self.drain(&original, to: 30).map(\.payload) == [1, 2])
        #expect(Self.drain(&copy, to: 30).map(\.payload) == [3, 2])
    }
}
