// Randomized differential test: the timing wheel against the heap oracle, op for op.
import Foundation
import HeraldCore
import HeraldTestSupport
import Testing

@Suite struct TimingWheelDifferentialTests {
    /// Operations per seed; `HERALD_WHEEL_FUZZ_OPS` raises it (e.g. 5000000) for a long run.
    static let opsPerSeed: Int = {
        if let text = ProcessInfo.processInfo.environment["HERALD_WHEEL_FUZZ_OPS"], let n = Int(text) { return n }
        return 200_000
    }()

    static let start = Instant(millisecondsSinceEpoch: 1_798_761_600_000)  // 2027-01-01T00:00:00Z

    @Test(arguments: [(UInt64(1), Int64(1)), (2, 1), (3, 1), (4, 7), (5, 1000)])
    func wheelAndHeapFireTheSameTimersInTheSameOrder(seed: UInt64, tick: Int64) {
        let failure = Self.run(seed: seed, tick: tick, operations: Self.opsPerSeed)
        #expect(failure == nil, "seed \(seed) tick \(tick): \(failure ?? "")")
    }

    /// Runs one seeded scenario; returns a description of the first disagreement, if any.
    static func run(seed: UInt64, tick: Int64, operations: Int) -> String? {
        var rng = SeededRandom(seed: seed)
        var wheel = TimingWheel(start: start, tickMilliseconds: tick)
        var heap = TimerHeap(start: start, tickMilliseconds: tick)
        var handles: [(wheel: TimerHandle, heap: TimerHandle)] = []
        var wheelFired: [FiredPair] = []
        var heapFired: [FiredPair] = []
        var now = start.millisecondsSinceEpoch
        // A few shared "round" instants so many timers tie on one tick (summaries at 08:00).
        let roundInstants = (1...6).map { now + Int64($0) * 3_600_000 }

        for op in 0..<operations {
            let roll = rng.next() % 1000
            switch roll {
            case 0..<450:
                let deadline: Int64
                switch rng.next() % 10 {
                case 0: deadline = now - Int64(rng.next() % 5_000)                    // overdue
                case 1, 2, 3: deadline = now + Int64(rng.next() % 200)               // next ticks
                case 4, 5: deadline = now + Int64(rng.next() % 86_400_000)           // within a day
                case 6: deadline = now + Int64(rng.next() % 315_360_000_000)         // within 10 years
                case 7: deadline = roundInstants[Int(rng.next() % 6)]               // ties
                case 8: deadline = now + Int64(rng.next() % 4_000_000)               // ~an hour
                default: deadline = now + Int64(rng.next() % 2_592_000_000)          // a month
                }
                let payload = rng.next() % 64  // small range: equal (deadline, payload) pairs happen
                let at = Instant(millisecondsSinceEpoch: deadline)
                handles.append((wheel.schedule(at: at, payload: payload), heap.schedule(at: at, payload: payload)))
            case 450..<700:
                guard !handles.isEmpty else { continue }
                let i = Int(rng.next() % UInt64(handles.count))
                let a = wheel.cancel(handles[i].wheel)
                let b = heap.cancel(handles[i].heap)
                if a != b { return "op \(op): cancel disagrees (wheel \(a), heap \(b))" }
                if rng.next() % 2 == 0 {  // keep some stale handles around for later stale cancels
                    handles.swapAt(i, handles.count - 1)
                    handles.removeLast()
                }
            default:
                let step: Int64
                switch rng.next() % 100 {
                case 0..<70: step = Int64(rng.next() % 20)
                case 70..<90: step = Int64(rng.next() % 5_000)
                case 90..<97: step = Int64(rng.next() % 86_400_000)
                case 97, 98: step = Int64(rng.next() % 2_678_400_000)  // up to a month
                default: step = rng.next() % 4 == 0 ? -Int64(rng.next() % 10_000) : Int64(rng.next() % 400_000_000_000)
                }
                now = max(now, now + step)
                let to = Instant(millisecondsSinceEpoch: now + (step < 0 ? step : 0))
                wheelFired.removeAll(keepingCapacity: true)
                heapFired.removeAll(keepingCapacity: true)
                wheel.advance(to: to) { wheelFired.append(FiredPair(deadline: $0.millisecondsSinceEpoch, payload: $1)) }
                heap.advance(to: to) { heapFired.append(FiredPair(deadline: $0.millisecondsSinceEpoch, payload: $1)) }
                if wheelFired != heapFired {
                    let i = zip(wheelFired, heapFired).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? min(wheelFired.count, heapFired.count)
                    return "op \(op): advance to \(to.millisecondsSinceEpoch) fired \(wheelFired.count) vs \(heapFired.count), first difference at \(i)"
                }
                if let late = wheelFired.first(where: { $0.deadline > max(to.millisecondsSinceEpoch, wheel.now.millisecondsSinceEpoch) }) {
                    return "op \(op): fired early: \(late)"
                }
                if handles.count > 50_000 { handles.removeFirst(25_000) }
            }
            if wheel.count != heap.count { return "op \(op): count \(wheel.count) vs \(heap.count)" }
            if op % 16 == 0 {
                switch (wheel.nextDeadline, heap.nextDeadline) {
                case (nil, nil): break
                case let (w?, h?) where w <= h: break
                case let (w, h): return "op \(op): nextDeadline \(String(describing: w)) vs exact \(String(describing: h))"
                }
            }
        }
        return nil
    }
}

struct FiredPair: Equatable, CustomStringConvertible {
    var deadline: Int64
    var payload: UInt64
    var description: String { "(\(deadline), \(payload))" }
}
