// The `wheel` benchmark: TimingWheel against the TimerHeap baseline at 1M and 10M live timers.
import HeraldCore
import HeraldTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The operations both structures share, so one generic driver measures both identically.
protocol BenchmarkedTimerQueue {
    init(start: Instant, tickMilliseconds: Int64)
    var count: Int { get }
    var storageBytes: Int { get }
    mutating func reserveCapacity(_ n: Int)
    mutating func schedule(at deadline: Instant, payload: UInt64) -> TimerHandle
    mutating func cancel(_ handle: TimerHandle) -> Bool
    mutating func advance(to now: Instant, _ body: (Instant, UInt64) -> Void)
    mutating func scheduleAll<S: Sequence>(_ timers: S) where S.Element == (Instant, UInt64)
}

extension TimingWheel: BenchmarkedTimerQueue {}
extension TimerHeap: BenchmarkedTimerQueue {}

/// One structure's numbers at one size (rates in operations per second).
struct WheelBenchmarkResult {
    var schedule = 0.0
    var cancelRandom = 0.0
    var cancelInOrder = 0.0
    var reschedule = 0.0
    var scheduleCancelPairs = 0.0
    var bulkLoad = 0.0
    var bulkLoadSeconds = 0.0
    var fireAll = 0.0
    var burstDrain = 0.0
    var bytesPerTimer = 0.0
    var checksum: UInt64 = 0

    /// Keeps the best of two runs for every rate (the fewest interruptions).
    mutating func keepBest(_ o: WheelBenchmarkResult) {
        schedule = Swift.max(schedule, o.schedule)
        cancelRandom = Swift.max(cancelRandom, o.cancelRandom)
        cancelInOrder = Swift.max(cancelInOrder, o.cancelInOrder)
        reschedule = Swift.max(reschedule, o.reschedule)
        scheduleCancelPairs = Swift.max(scheduleCancelPairs, o.scheduleCancelPairs)
        bulkLoad = Swift.max(bulkLoad, o.bulkLoad)
        bulkLoadSeconds = Swift.min(bulkLoadSeconds, o.bulkLoadSeconds)
        fireAll = Swift.max(fireAll, o.fireAll)
        burstDrain = Swift.max(burstDrain, o.burstDrain)
    }
}

private let week: Int64 = 7 * 86_400_000
private let benchmarkStart = Instant(millisecondsSinceEpoch: 1_798_761_600_000)  // 2027-01-01T00:00:00Z

/// A monotonic stopwatch over this thread's CPU time (CLOCK_THREAD_CPUTIME_ID): on a 2-core
/// machine shared with other builds, wall time mostly measures how often we were descheduled.
/// Pass `--wall` to use the monotonic wall clock (ContinuousClock) instead.
struct Stopwatch {
    // Set once while parsing arguments, before any measurement, on the only thread.
    nonisolated(unsafe) static var useWallClock = false
    let wallStart = ContinuousClock.now
    let cpuStart = Stopwatch.cpuSeconds()

    static func cpuSeconds() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) * 1e-9
    }

    var elapsed: Double {
        if Stopwatch.useWallClock {
            let (s, atto) = (ContinuousClock.now - wallStart).components
            return Double(s) + Double(atto) * 1e-18
        }
        return Stopwatch.cpuSeconds() - cpuStart
    }
}

/// Runs every phase on one fresh structure of type `Q` with `n` live timers.
func measure<Q: BenchmarkedTimerQueue>(_: Q.Type, n: Int, burst: Int, deadlines: ContiguousArray<Instant>,
                                       cancelOrder: ContiguousArray<Int>, burstPayloads: ContiguousArray<UInt64>) -> WheelBenchmarkResult {
    var r = WheelBenchmarkResult()
    var q = Q(start: benchmarkStart, tickMilliseconds: 1)
    q.reserveCapacity(n)
    var handles = ContiguousArray(repeating: TimerHandle?.none, count: n)

    // Schedule n timers spread uniformly over a week (fresh storage, capacity reserved).
    var t = Stopwatch()
    for i in 0..<n { handles[i] = q.schedule(at: deadlines[i], payload: UInt64(i)) }
    let scheduleSeconds = t.elapsed
    r.schedule = Double(n) / scheduleSeconds
    r.bytesPerTimer = Double(q.storageBytes) / Double(n)

    // Cancel all of them in random order (handles permuted beforehand, so the loop reads
    // them sequentially and only the structure's own memory traffic is measured).
    let shuffled = ContiguousArray(cancelOrder.lazy.map { handles[$0]! })
    t = Stopwatch()
    var cancelled = 0
    for h in shuffled where q.cancel(h) { cancelled &+= 1 }
    let cancelSeconds = t.elapsed
    precondition(cancelled == n && q.count == 0)
    r.cancelRandom = Double(n) / cancelSeconds
    r.scheduleCancelPairs = Double(n) / (scheduleSeconds + cancelSeconds)

    // Schedule again into the freed storage (for the wheel this includes reclaiming the
    // lazily cancelled nodes), then cancel in schedule order.
    t = Stopwatch()
    for i in 0..<n { handles[i] = q.schedule(at: deadlines[i], payload: UInt64(i)) }
    r.reschedule = Double(n) / t.elapsed
    t = Stopwatch()
    for i in 0..<n { _ = q.cancel(handles[i]!) }
    r.cancelInOrder = Double(n) / t.elapsed
    handles = []

    // Bulk load (restart rebuild) into a fresh structure, as a restarted process would.
    q = Q(start: benchmarkStart, tickMilliseconds: 1)
    t = Stopwatch()
    q.scheduleAll(deadlines.lazy.enumerated().map { ($0.element, UInt64($0.offset)) })
    r.bulkLoadSeconds = t.elapsed
    r.bulkLoad = Double(n) / r.bulkLoadSeconds
    precondition(q.count == n)

    // Fire everything: one advance through the whole week.
    var checksum: UInt64 = 0
    var fired = 0
    t = Stopwatch()
    q.advance(to: benchmarkStart.adding(.init(milliseconds: week))) { deadline, payload in
        checksum = checksum &* 31 &+ payload &+ UInt64(bitPattern: deadline.millisecondsSinceEpoch)
        fired &+= 1
    }
    r.fireAll = Double(fired) / t.elapsed
    precondition(fired == n && q.count == 0)

    // Burst: n live timers, `burst` of them due in the same tick an hour ahead (an 08:00
    // summary), the rest spread over the following week; drain the burst tick.
    let burstTime = benchmarkStart.adding(.init(milliseconds: week + 3_600_000))
    for i in 0..<burst { _ = q.schedule(at: burstTime, payload: burstPayloads[i]) }
    for i in burst..<n { _ = q.schedule(at: deadlines[i].adding(.init(milliseconds: week + 3_600_001)), payload: UInt64(i)) }
    fired = 0
    t = Stopwatch()
    q.advance(to: burstTime) { _, payload in
        checksum = checksum &* 31 &+ payload
        fired &+= 1
    }
    r.burstDrain = Double(fired) / t.elapsed
    precondition(fired == burst)
    r.checksum = checksum
    return r
}

func runWheelBenchmark(arguments: [String]) {
    var sizes = [1_000_000, 10_000_000]
    var burst = 1_000_000
    var seed: UInt64 = 1
    var skipHeap = false
    var repeats = 1
    var i = 0
    while i < arguments.count {
        let value = i + 1 < arguments.count ? arguments[i + 1] : ""
        switch arguments[i] {
        case "--timers": sizes = value.split(separator: ",").compactMap { Int($0) }
        case "--burst": burst = Int(value) ?? burst
        case "--seed": seed = UInt64(value) ?? seed
        case "--wheel-only": skipHeap = true; i -= 1  // profiling aid: no heap, raw numbers
        case "--wall": Stopwatch.useWallClock = true; i -= 1
        case "--repeat": repeats = Swift.max(1, Int(value) ?? 1)
        default: print("unknown option \(arguments[i])"); return
        }
        i += 2
    }

    print("wheel benchmark: deadlines uniform over one week, 1 ms tick, seed \(seed), burst \(burst) timers in one tick,")
    print("\(Stopwatch.useWallClock ? "wall-clock (ContinuousClock)" : "thread CPU time (CLOCK_THREAD_CPUTIME_ID)"), best of \(repeats) run(s)")
    var columns: [(n: Int, wheel: WheelBenchmarkResult, heap: WheelBenchmarkResult)] = []
    for n in sizes {
        var rng = SeededRandom(seed: seed)
        let deadlines = ContiguousArray((0..<n).map { _ in benchmarkStart.adding(.init(milliseconds: Int64(rng.next() % UInt64(week)) + 1)) })
        var order = ContiguousArray(0..<n)
        order.shuffle(using: &rng)
        let b = Swift.min(burst, n)
        let burstPayloads = ContiguousArray((0..<b).map { _ in rng.next() % UInt64(n) })
        var wheel = measure(TimingWheel.self, n: n, burst: b, deadlines: deadlines, cancelOrder: order, burstPayloads: burstPayloads)
        for _ in 1..<repeats {
            wheel.keepBest(measure(TimingWheel.self, n: n, burst: b, deadlines: deadlines, cancelOrder: order, burstPayloads: burstPayloads))
        }
        if skipHeap {
            print(wheel)
            continue
        }
        var heap = measure(TimerHeap.self, n: n, burst: b, deadlines: deadlines, cancelOrder: order, burstPayloads: burstPayloads)
        for _ in 1..<repeats {
            heap.keepBest(measure(TimerHeap.self, n: n, burst: b, deadlines: deadlines, cancelOrder: order, burstPayloads: burstPayloads))
        }
        precondition(wheel.checksum == heap.checksum, "wheel and heap fired different sequences")
        columns.append((n, wheel, heap))
    }
    printTable(columns, burst: burst)
}

private func printTable(_ columns: [(n: Int, wheel: WheelBenchmarkResult, heap: WheelBenchmarkResult)], burst: Int) {
    func label(_ n: Int) -> String { n % 1_000_000 == 0 ? "\(n / 1_000_000)M" : n % 1000 == 0 ? "\(n / 1000)k" : "\(n)" }
    func pad(_ s: String, _ w: Int) -> String { String(repeating: " ", count: Swift.max(0, w - s.count)) + s }
    func fmt(_ x: Double, _ digits: Int = 2) -> String {
        var s = String(Int((x * 100).rounded()))
        while s.count < 3 { s = "0" + s }
        return digits == 2 ? "\(s.dropLast(2)).\(s.suffix(2))" : "\(s.dropLast(2))"
    }
    let rows: [(String, (WheelBenchmarkResult) -> Double, Bool)] = [
        ("schedule (M/s)", { $0.schedule / 1e6 }, true),
        ("cancel, random order (M/s)", { $0.cancelRandom / 1e6 }, true),
        ("re-schedule after cancel-all (M/s)", { $0.reschedule / 1e6 }, true),
        ("cancel, schedule order (M/s)", { $0.cancelInOrder / 1e6 }, true),
        ("schedule+cancel (M pairs/s)", { $0.scheduleCancelPairs / 1e6 }, true),
        ("bulk load scheduleAll (M/s)", { $0.bulkLoad / 1e6 }, true),
        ("bulk load time (s)", { $0.bulkLoadSeconds }, false),
        ("fire-all over a week (M/s)", { $0.fireAll / 1e6 }, true),
        ("burst drain, \(label(burst)) in one tick (M/s)", { $0.burstDrain / 1e6 }, true),
        ("bytes per live timer", { $0.bytesPerTimer }, false),
    ]
    var header = pad("", 36)
    for c in columns { header += " | " + pad("\(label(c.n)) wheel", 10) + pad("\(label(c.n)) heap", 10) + pad("ratio", 7) }
    print(header)
    print(String(repeating: "-", count: header.count))
    for (name, value, higherIsBetter) in rows {
        var line = pad(name, 36)
        for c in columns {
            let w = value(c.wheel), h = value(c.heap)
            let ratio = higherIsBetter ? w / h : h / w
            line += " | " + pad(fmt(w), 10) + pad(fmt(h), 10) + pad(fmt(ratio) + "x", 7)
        }
        print(line)
    }
    print("ratio: wheel over heap (for time and bytes: heap over wheel, so > 1 means the wheel is better)")
}
