// Engine micro-benchmarks: decisions per second on one core with warm state, and bytes per idle user.
import HeraldCore
import HeraldTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// CPU time of the calling thread: on a shared machine (other builds running) this is
/// what "one core" means; wall time is printed beside it.
func threadCPUSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// Measures `body`, returning (wall seconds, thread CPU seconds). Shared by the engine and
/// snapshot benchmarks.
func measure(_ body: () -> Void) -> (wall: Double, cpu: Double) {
    let clock = ContinuousClock()
    let c0 = threadCPUSeconds()
    let t0 = clock.now
    body()
    let dt = t0.duration(to: clock.now)
    return (Double(dt.components.seconds) + Double(dt.components.attoseconds) / 1e18, threadCPUSeconds() - c0)
}

/// "N/s (wall M/s)" for `count` operations.
private func rate(_ count: Int, _ m: (wall: Double, cpu: Double)) -> String {
    "\(Int(Double(count) / m.cpu))/s per CPU-second (wall: \(Int(Double(count) / m.wall))/s)"
}

/// Runs the engine benchmarks and prints one line per measurement. Arguments:
/// `--users N` (default 10000), `--decisions N` (default 2000000).
public func runEngineBenchmark(arguments: [String]) {
    func arg(_ name: String, _ def: Int) -> Int {
        if let i = arguments.firstIndex(of: name), i + 1 < arguments.count, let v = Int(arguments[i + 1]) { return v }
        return def
    }
    let users = arg("--users", 10_000)
    if let i = arguments.firstIndex(of: "--storm"), i + 1 < arguments.count, let n = Int(arguments[i + 1]) {
        runEngineStorm(users: n)
        return
    }
    print("engine.sizes       SubmittedNotification \(MemoryLayout<SubmittedNotification>.stride) B, Delivery \(MemoryLayout<Delivery>.stride) B, UserState \(MemoryLayout<UserState>.stride) B")
    let decisions = arg("--decisions", 2_000_000)
    let engine = Engine()
    var apps = AppRegistry()
    let appNames = ["com.example.mail", "com.example.chat", "com.example.news", "com.example.cal", "com.example.pager"]
    let start = Instant(rfc3339: "2026-01-05T12:00:00Z")!
    var seq: Int64 = 0

    // Warm state: every user authorizes every app; some settings vary.
    var states: [UserState] = (0..<users).map { UserState(user: "user\($0)") }
    for (i, _) in states.enumerated() {
        for a in appNames {
            seq += 1
            _ = engine.apply(StoredEvent(seq: seq, user: states[i].user, type: "authorization",
                                         body: .object(["user": .string(states[i].user), "app": .string(a), "status": .string("authorized"),
                                                        "options": .array([.string("alert"), .string("sound"), .string("badge")])]),
                                         at: start), to: &states[i], apps: &apps)
        }
    }

    // 1. Immediate decisions: active/passive/timeSensitive submits, decided at arrival.
    var rng = SeededRandom(seed: 42)
    let bodyCount = 4096
    var bodies: [(Int, JSONValue)] = []
    for k in 0..<bodyCount {
        let u = Int(rng.next() % UInt64(users))
        let a = appNames[Int(rng.next() % UInt64(appNames.count))]
        let level = ["active", "active", "passive", "timeSensitive"][Int(rng.next() % 4)]
        bodies.append((u, .object(["id": .string("n\(k)"), "app": .string(a), "user": .string(states[u].user),
                                   "interruptionLevel": .string(level), "title": .string("Hello"), "body": .string("World"),
                                   "hiddenPreviewsBodyPlaceholder": .string("New message")])))
    }
    // Warm up so every (user, app) has a full recent list (steady state).
    func runSubmits(_ count: Int, idBase: Int) -> (String, Int) {
        var delivered = 0
        let m = measure {
        for k in 0..<count {
            // Bodies repeat (ids too): idempotency is the runtime's, the engine decides each.
            let (u, body) = bodies[k & (bodyCount - 1)]
            seq += 1
            let ev = StoredEvent(seq: seq, user: states[u].user, type: "submit", body: body,
                                 at: start.adding(.init(milliseconds: Int64(k))))
            delivered &+= engine.apply(ev, to: &states[u], apps: &apps).deliveries.count
        }
        }
        return (rate(count, m), delivered)
    }
    _ = runSubmits(min(decisions, users * 64), idBase: 10_000_000)
    let (jsonRate, n) = runSubmits(arguments.contains("--decoded-only") ? 1 : decisions, idBase: 100_000_000)
    print("engine.immediate   \(jsonRate) decisions   (\(n) deliveries, \(users) warm users, apply() parsing the stored JSON body, one core)")
    // The same with the notification decoded once at the door (EventDraft.decoded), as the
    // runtime does for events it admitted itself.
    let drafts: [(Int, EventDraft)] = bodies.map { (u, b) in
        guard case .accepted(let a) = engine.admit(op: "submit", request: b, apps: apps) else { fatalError("rejected") }
        return (u, a.events[0])
    }
    do {
        var delivered = 0
        let count = arguments.contains("--json-only") ? 1 : decisions
        let m = measure {
        for k in 0..<count {
            let (u, d) = drafts[k & (bodyCount - 1)]
            seq += 1
            delivered &+= engine.apply(StoredEvent(d, seq: seq, at: start.adding(.init(milliseconds: Int64(k)))),
                                       to: &states[u], apps: &apps).deliveries.count
        }
        }
        print("engine.immediate   \(rate(count, m)) decisions   (\(delivered) deliveries, apply() with the door's decoded notification, one core)")
    }
    if arguments.contains("--immediate-only") { return }

    // 2. Mixed workload: submits with summary/Focus/deferred/collapse plus settings and timers.
    var mixed: [StoredEvent] = []
    var t = start.adding(.days(1))
    for k in 0..<200_000 {
        let u = Int(rng.next() % UInt64(users))
        let user = states[u].user
        let a = appNames[Int(rng.next() % UInt64(appNames.count))]
        t = t.adding(.init(milliseconds: 5))
        seq += 1
        let r = rng.next() % 100
        let body: JSONValue
        let type: String
        switch r {
        case 0..<3:
            type = "settings"; body = .object(["user": .string(user), "app": .string(a), "delivery": .string(r == 0 ? "summary" : "immediate")])
        case 3..<5:
            type = r == 3 ? "focusOn" : "focusOff"; body = .object(["user": .string(user), "focus": .string("Work")])
        case 5..<7:
            type = "opened"; body = .object(["user": .string(user), "app": .string(a)])
        default:
            type = "submit"
            var o: [String: JSONValue] = ["id": .string("m\(k)"), "app": .string(a), "user": .string(user), "title": .string("Hi"),
                                          "interruptionLevel": .string(["active", "passive", "timeSensitive"][Int(rng.next() % 3)])]
            if r < 15 { o["collapseId"] = .string("c\(r)") }
            if r >= 95 { o["deliverAt"] = .string(t.adding(.minutes(10)).rfc3339) }
            body = .object(o)
        }
        mixed.append(StoredEvent(seq: seq, user: user, type: type, body: body, at: t))
    }
    var out = 0
    let mixedUsers = mixed.map { Int($0.user!.dropFirst(4))! }
    let mm = measure {
        for (i, ev) in mixed.enumerated() {
            out &+= engine.apply(ev, to: &states[mixedUsers[i]], apps: &apps).deliveries.count
        }
    }
    print("engine.mixed       \(rate(mixed.count, mm)) events   (\(out) deliveries, settings/Focus/opened/deferred/collapse mix)")

    // 3. Delivery encoding: canonical bytes of a typical alert.
    var ds: [Delivery] = []
    var s = states[0]
    for k in 0..<1000 {
        seq += 1
        ds += engine.apply(StoredEvent(seq: seq, user: s.user, type: "submit", body: bodies[k].1, at: t), to: &s, apps: &apps).deliveries
    }
    var bytes = 0
    let me = measure { for _ in 0..<100 { for d in ds { bytes &+= d.body.canonicalBytes.count } } }
    print("engine.encode      \(rate(ds.count * 100, me)) deliveries  via body.canonicalBytes")
    var bytes2 = 0
    let me2 = measure { for _ in 0..<100 { for d in ds { bytes2 &+= d.bodyBytes.count } } }
    precondition(bytes2 == bytes)
    print("engine.encode      \(rate(ds.count * 100, me2)) deliveries  via bodyBytes (direct writer)  (\(bytes / (ds.count * 100)) bytes each, canonical JSON)")

    // 4. Bytes per idle user.
    print("engine.idleUser    MemoryLayout<UserState>.stride = \(MemoryLayout<UserState>.stride) bytes")
    #if canImport(Glibc)
    // Resident memory from /proc/self/statm (glibc's mallinfo2 is not visible to Swift):
    // with a million users the page granularity is noise.
    func heapInUse() -> Int {
        guard let f = fopen("/proc/self/statm", "r") else { return 0 }
        defer { fclose(f) }
        var size = 0, resident = 0
        _ = withUnsafeMutablePointer(to: &size) { sp in
            withUnsafeMutablePointer(to: &resident) { rp in
                withVaList([sp, rp]) { vfscanf(f, "%ld %ld", $0) }
            }
        }
        return resident * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
    let count = 1_000_000
    let names = (0..<count).map { "user-\($0)-xyzw" }  // 15+ bytes: a heap-allocated String, as real ids are
    let before = heapInUse()
    var idle: [UserState] = []
    idle.reserveCapacity(count)
    for n in names { idle.append(UserState(user: n)) }
    let fresh = heapInUse() - before
    print("engine.idleUser    default settings: \(fresh / count) bytes/user resident (inline \(MemoryLayout<UserState>.stride), the id string is shared with the caller)")
    let before2 = heapInUse()
    for i in 0..<count {
        seq += 1
        _ = engine.apply(StoredEvent(seq: seq, user: idle[i].user, type: "authorization",
                                     body: .object(["user": .string(idle[i].user), "app": .string("com.example.mail"),
                                                    "status": .string("authorized"), "options": .array([.string("alert"), .string("badge")])]),
                                     at: start), to: &idle[i], apps: &apps)
    }
    let oneApp = heapInUse() - before2
    print("engine.idleUser    + one authorized app, nothing pending: \((fresh + oneApp) / count) bytes/user resident")
    withExtendedLifetime(idle) {}
    withExtendedLifetime(names) {}
    #endif
}

/// The 08:00 storm in the engine alone (no database, no sockets): `users` users with a summary at
/// 08:00 and three queued items each (`SyntheticWorkloads.stormUser`), then every user's timers
/// fired at that instant. Deterministic (no clock, no I/O), so a profile of it repeats exactly.
func runEngineStorm(users: Int) {
    let engine = Engine()
    var apps = AppRegistry()
    let start = Instant(rfc3339: "2026-11-23T21:00:00Z")!, instant = Instant(rfc3339: "2026-11-24T08:00:00Z")!
    var seq: Int64 = 0
    func admitAndApply(_ op: String, _ body: JSONValue, _ state: inout UserState) {
        guard case .accepted(let a) = engine.admit(op: op, request: body, apps: apps, now: start) else { fatalError("rejected \(op)") }
        for draft in a.events {
            seq += 1
            _ = engine.apply(StoredEvent(draft, seq: seq, at: start), to: &state, apps: &apps)
        }
    }
    var scratch = UserState(user: "")
    let register = SyntheticWorkloads.registerApp()
    admitAndApply(register.op, register.body, &scratch)
    var states: [UserState] = []
    states.reserveCapacity(users)
    for u in 0..<users {
        var s = UserState(user: "user-\(u)")
        for r in SyntheticWorkloads.stormUser(u, items: 3) { admitAndApply(r.op, r.body, &s) }
        states.append(s)
    }
    var out: [Delivery] = []
    out.reserveCapacity(users)
    let m = measure {
        for u in 0..<users { _ = engine.advance(&states[u], to: instant, apps: apps, appendingTo: &out) }
    }
    let summaries = out.filter { $0.kind == .summary }.count
    print("engine.storm       \(Int(Double(users) / m.cpu)) summaries/s per CPU-second (wall: \(Int(Double(users) / m.wall))/s)   (\(summaries) summaries of \(users) users, 3 items each, engine only)")
    // The stored body of each, as the service encodes its delivery rows (`Delivery.storedBody`).
    var sink = ByteSink(capacity: 64 * 1024)
    defer { sink.deallocate() }
    var bytes = 0
    let me = measure {
        out.withUnsafeBufferPointer { ds in
            for i in ds.indices { bytes &+= Delivery.storedBody(at: ds.baseAddress! + i, using: &sink).count }
        }
    }
    print("engine.storm       \(Int(Double(out.count) / me.cpu)) stored bodies/s per CPU-second (wall: \(Int(Double(out.count) / me.wall))/s)   (\(bytes / max(out.count, 1)) bytes each)")
}
