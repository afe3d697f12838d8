// The heap oracle checked against a brute-force sorted list, so the differential test's judge is sound.
import HeraldCore
import HeraldTestSupport
import Testing

@Suite struct TimingHeapOracleTests {
    @Test func heapMatchesABruteForceModel() {
        var rng = SeededRandom(seed: 2024)
        var heap = TimerHeap(start: .epoch)
        var model: [(handle: TimerHandle, deadline: Int64, payload: UInt64)] = []
        var stale: [TimerHandle] = []
        var now: Int64 = 0
        for _ in 0..<20_000 {
            switch rng.next() % 10 {
            case 0..<5:
                let d = now + Int64(rng.next() % 1_000) - 100
                let p = rng.next() % 8
                model.append((heap.schedule(at: Instant(millisecondsSinceEpoch: d), payload: p), d, p))
            case 5, 6:
                if !model.isEmpty {
                    let i = Int(rng.next() % UInt64(model.count))
                    let cancelled = heap.cancel(model[i].handle)
                    #expect(cancelled)
                    stale.append(model.remove(at: i).handle)
                } else if let h = stale.last {
                    let cancelled = heap.cancel(h)
                    #expect(cancelled == false)
                }
            default:
                now += Int64(rng.next() % 50)
                var fired: [FiredPair] = []
                heap.advance(to: Instant(millisecondsSinceEpoch: now)) { fired.append(FiredPair(deadline: $0.millisecondsSinceEpoch, payload: $1)) }
                let due = model.filter { $0.deadline <= now }
                    .map { FiredPair(deadline: $0.deadline, payload: $0.payload) }
                    .sorted { ($0.deadline, $0.payload) < ($1.deadline, $1.payload) }
                stale += model.filter { $0.deadline <= now }.map(\.handle)
                model.removeAll { $0.deadline <= now }
                #expect(fired == due)
            }
            #expect(heap.count == model.count)
            #expect(heap.nextDeadline?.millisecondsSinceEpoch == model.map(\.deadline).min())
        }
    }

    @Test func bulkScheduleBuildsAValidHeap() {
        var rng = SeededRandom(seed: 1)
        let timers = (0..<10_000).map { _ in (Instant(millisecondsSinceEpoch: Int64(rng.next() % 100_000)), rng.next() % 10) }
        var heap = TimerHeap(start: .epoch)
        heap.scheduleAll(timers)
        var fired: [FiredPair] = []
        heap.advance(to: Instant(millisecondsSinceEpoch: 100_000)) { fired.append(FiredPair(deadline: $0.millisecondsSinceEpoch, payload: $1)) }
        #expect(fired == timers.map { FiredPair(deadline: $0.0.millisecondsSinceEpoch, payload: $0.1) }
            .sorted { ($0.deadline, $0.payload) < ($1.deadline, $1.payload) })
    }
}
