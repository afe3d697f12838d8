// A closed-loop load of pipelined submits over TCP: N producer connections, each keeping W requests outstanding.
import Foundation
import Glibc
import HeraldCore
import HeraldStore
import Synchronization

/// The producer side of `herald bench ingest`: realistic ~300-byte submits over many users,
/// each acknowledged only after COMMIT; measures acks/s and ack latency.
public struct IngestLoad: Sendable {
    public var producers = 8
    public var events = 100_000
    public var window = 256
    public var users = 10_000
    public var app = "com.example.mail"
    public var idPrefix = "bench"

    public init() {}

    public struct Result: Sendable {
        public var acked: Int
        public var seconds: Double
        /// Send → acknowledgement (after COMMIT) of each submit.
        public var latencies: Latencies
        public var acksPerSecond: Double { Double(acked) / seconds }
        public func percentile(_ p: Double) -> Double { latencies.percentile(p) }
    }

    /// Registers the app and authorizes every user (so submits are decided, not suppressed).
    public func prepare(port: Int) throws {
        let c = try WireClient(port: port)
        _ = try c.request(#"{"op":"hello"}"#)
        try c.send(#"{"op":"registerApp","app":"\#(app)","entitlements":[]}"#)
        // Pipelined, at most `window` unanswered: the service stops reading a client that leaves
        // its replies unread (backpressure), so writing every request before reading one would
        // stall both sides once enough replies are queued (around 185,000 users), and the service
        // would close the connection.
        let window = 4_096
        var unanswered = 1
        for u in 0..<users {
            try c.send(#"{"op":"authorization","user":"user-\#(u)","app":"\#(app)","status":"authorized","options":["alert","sound","badge"]}"#)
            unanswered += 1
            if unanswered >= window {
                _ = try c.readJSON(timeoutMilliseconds: 120_000)
                unanswered -= 1
            }
        }
        for _ in 0..<unanswered { _ = try c.readJSON(timeoutMilliseconds: 120_000) }
    }

    /// The rows the service stores for this load (for the COPY baseline of the same data).
    public func rows() -> [EventRow] {
        (0..<events).map { i in
            EventRow(user: "user-\(i % users)", type: "submit", app: app, notificationId: "\(idPrefix)-\(i)",
                     body: line(i), engineTime: Instant(millisecondsSinceEpoch: 1_780_000_000_000 + Int64(i)))
        }
    }

    /// One submit line.
    public func line(_ i: Int) -> String {
        #"{"op":"submit","id":"\#(idPrefix)-\#(i)","app":"\#(app)","user":"user-\#(i % users)","title":"Order shipped","body":"Your order #\#(i) has shipped and will arrive on Tuesday between 9 and 12. Track it in the app.","hiddenPreviewsBodyPlaceholder":"Order update","threadId":"orders","interruptionLevel":"active"}"#
    }

    /// Runs the load: one thread per producer (not `DispatchQueue.concurrentPerform`, which runs
    /// only as many iterations at once as there are cores — two here, so only 2 × `window` requests
    /// were ever in flight). Each producer's lines are encoded before the clock starts; a producer
    /// writes every line its window allows in one `write`, reads whatever acks have arrived in one
    /// `read`, and scans them in place (no JSON parse, no per-line copy), so the generator's own
    /// CPU per request stays small beside the service's.
    /// `makeLine` gives request i's line (default: `line(_:)`; the peer bench sends deferred submits).
    public func run(port: Int, makeLine: ((Int) -> String)? = nil,
                    progress: @escaping @Sendable (Int) -> Void = { _ in }) throws -> Result {
        let perProducer = events / producers
        let results = Mutex<[Latencies]>([])
        let failure = Mutex<String?>(nil)
        let ackedSoFar = Atomic<Int>(0)
        // Connect, say hello and encode every line first; then all producers start together.
        var connections: [(fd: Int32, lines: [UInt8], ends: [Int])] = []
        for p in 0..<producers {
            let c = try WireClient(port: port)
            let hello = try c.request(#"{"op":"hello"}"#)
            guard hello["ok"] == true else { throw WireClient.Failure.io("hello refused: \(hello.canonicalString)") }
            var bytes: [UInt8] = []
            var ends: [Int] = []
            bytes.reserveCapacity(perProducer * 340)
            ends.reserveCapacity(perProducer)
            for i in 0..<perProducer {
                bytes += (makeLine?(p * perProducer + i) ?? line(p * perProducer + i)).utf8
                bytes.append(0x0A)
                ends.append(bytes.count)
            }
            // Take over the socket: nothing was sent after the hello reply, so nothing is buffered.
            connections.append((dup(c.fileDescriptor), bytes, ends))
            c.close()
        }
        let start = DispatchSemaphore(value: 0)
        let group = DispatchGroup()
        let started = Mutex<UInt64>(0)
        for (p, connection) in connections.enumerated() {
            group.enter()
            Thread {
                defer { Glibc.close(connection.fd); group.leave() }
                start.wait()
                let t0 = started.withLock { $0 }
                do {
                    let latencies = try Self.produce(fd: connection.fd, lines: connection.lines, ends: connection.ends,
                                                     window: window, t0: t0) { n in
                        let total = ackedSoFar.add(n, ordering: .relaxed).newValue
                        if total / 10_000 != (total - n) / 10_000 { progress(total / 10_000 * 10_000) }
                    }
                    results.withLock { $0.append(latencies) }
                } catch {
                    failure.withLock { $0 = "producer \(p): \(error)" }
                }
            }.start()
        }
        started.withLock { $0 = Self.monotonicNanoseconds() }
        for _ in connections { start.signal() }
        group.wait()
        let seconds = Double(Self.monotonicNanoseconds() - started.withLock { $0 }) / 1e9
        if let f = failure.withLock({ $0 }) { throw WireClient.Failure.io(f) }
        var all = Latencies()
        for producer in results.withLock({ $0 }) { all.add(producer) }
        return Result(acked: all.count, seconds: seconds, latencies: all)
    }

    static func monotonicNanoseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    /// One producer's closed loop on a blocking socket; returns its requests' ack latencies.
    private static func produce(fd: Int32, lines: [UInt8], ends: [Int], window: Int, t0: UInt64,
                                acked: (Int) -> Void) throws -> Latencies {
        let count = ends.count
        var sendTimes = [UInt64](repeating: 0, count: count)
        var latencies = Latencies()
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        var filled = 0
        var sent = 0, received = 0
        while received < count {
            if sent < count && sent - received < window {
                let last = min(count, received + window)
                let from = sent == 0 ? 0 : ends[sent - 1], to = ends[last - 1]
                let now = monotonicNanoseconds()
                for i in sent..<last { sendTimes[i] = now }
                var offset = from
                while offset < to {
                    let n = lines.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, to - offset) }
                    if n <= 0 { throw WireClient.Failure.io("write failed: \(String(cString: strerror(errno)))") }
                    offset += n
                }
                sent = last
            }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&p, 1, 60_000)
            if ready == 0 { throw WireClient.Failure.timeout }
            if ready < 0 { if errno == EINTR { continue }; throw WireClient.Failure.io("poll failed") }
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + filled, $0.count - filled) }
            if n == 0 { throw WireClient.Failure.closed }
            if n < 0 { throw WireClient.Failure.io("read failed: \(String(cString: strerror(errno)))") }
            filled += n
            let now = monotonicNanoseconds()
            var lineStart = 0, acks = 0
            let ok: StaticString = "{\"ok\":true,"
            for i in 0..<filled where buffer[i] == 0x0A {
                // A success reply starts with `{"ok":true,` (WireReply's templates); anything else is a refusal.
                let isOK = i - lineStart >= ok.utf8CodeUnitCount
                    && buffer.withUnsafeBytes { memcmp($0.baseAddress! + lineStart, ok.utf8Start, ok.utf8CodeUnitCount) == 0 }
                guard isOK else {
                    throw WireClient.Failure.io("refused: \(String(decoding: buffer[lineStart..<i], as: UTF8.self))")
                }
                latencies.record(from: sendTimes[received], to: now)
                received += 1
                acks += 1
                lineStart = i + 1
            }
            if lineStart > 0 {
                buffer.withUnsafeMutableBytes { b in _ = memmove(b.baseAddress!, b.baseAddress! + lineStart, filled - lineStart) }
                filled -= lineStart
            }
            if filled == buffer.count { buffer += [UInt8](repeating: 0, count: buffer.count) }
            if acks > 0 { acked(acks) }
        }
        return latencies
    }
}
