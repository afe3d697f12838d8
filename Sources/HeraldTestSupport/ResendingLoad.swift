// Producers that survive crashes (reconnect, re-send every unacknowledged request with the same id) and a durable consumer that resumes.
import Foundation
import Glibc
import HeraldCore
import Synchronization

/// The experiments' load: `producers` connections each keeping `window` submits outstanding,
/// to `users` authorized users. A producer whose connection dies reconnects (retrying until
/// `deadline`) and re-sends every request it has no reply for, with the same id; a
/// `store_unavailable` reply is re-sent after a short pause. Everything goes to the recorder.
public struct ResendingLoad: Sendable {
    public var producers = 8
    public var events = 5_000
    public var window = 128
    public var users = 200
    public var app = "com.example.reliability"
    public var idPrefix = "r"
    /// Makes event i deferred: its `deliverAt` (experiment 6).
    public var deliverAt: (@Sendable (Int) -> Instant?)?
    /// Give up (throw) if the load has not completed by then.
    public var timeoutSeconds: Double = 600

    public init() {}

    /// What the producers saw.
    public struct Stats: Sendable, CustomStringConvertible {
        public var sent = 0, resent = 0, acked = 0, duplicates = 0, unavailable = 0, reconnects = 0, rejected = 0
        public var description: String {
            "sent \(sent) (\(resent) re-sent), acked \(acked) (\(duplicates) as duplicate), store_unavailable \(unavailable), reconnects \(reconnects), rejected \(rejected)"
        }
    }

    public func key(_ i: Int) -> HistoryChecker.Key { .init(app: app, id: "\(idPrefix)-\(i)", user: "user-\(i % users)") }
    public func payload(_ i: Int) -> String { "Order #\(i) has shipped and arrives on Tuesday between 9 and 12." }
    public func line(_ i: Int) -> String {
        let deferred = deliverAt?(i).map { #""deliverAt":"\#($0.rfc3339)","# } ?? ""
        return #"{"op":"submit","rid":\#(i),\#(deferred)"id":"\#(idPrefix)-\#(i)","app":"\#(app)","user":"user-\#(i % users)","title":"Order shipped","body":"\#(payload(i))","hiddenPreviewsBodyPlaceholder":"Order update","threadId":"orders"}"#
    }

    /// Registers the app and authorizes every user, retrying through crashes (these requests are idempotent).
    public func prepare(port: Int) throws {
        let deadline = Date().addingTimeInterval(120)
        while true {
            do {
                let c = try WireClient(port: port)
                _ = try c.request(#"{"op":"hello"}"#)
                try c.send(#"{"op":"registerApp","app":"\#(app)","entitlements":[]}"#)
                for u in 0..<users {
                    try c.send(#"{"op":"authorization","user":"user-\#(u)","app":"\#(app)","status":"authorized","options":["alert","sound","badge"]}"#)
                }
                var failed = false
                for _ in 0...users where try c.readJSON(timeoutMilliseconds: 60_000)["ok"] != true { failed = true }
                if !failed { return }
            } catch {}
            if Date() > deadline { throw ExperimentError("could not register the app and authorize \(users) users within 120 s") }
            usleep(200_000)
        }
    }

    /// Runs every producer to completion (every event acknowledged), recording into `recorder`.
    public func run(port: Int, recorder: HistoryRecorder) throws -> Stats {
        let total = Mutex(Stats())
        let failure = Mutex<String?>(nil)
        let deadline = Date().addingTimeInterval(timeoutSeconds)
        DispatchQueue.concurrentPerform(iterations: producers) { p in
            do {
                let s = try produce(p, port: port, recorder: recorder, deadline: deadline)
                total.withLock { t in
                    t.sent += s.sent; t.resent += s.resent; t.acked += s.acked; t.duplicates += s.duplicates
                    t.unavailable += s.unavailable; t.reconnects += s.reconnects; t.rejected += s.rejected
                }
            } catch {
                failure.withLock { $0 = $0 ?? "producer \(p): \(error)" }
            }
        }
        if let f = failure.withLock({ $0 }) { throw ExperimentError(f) }
        return total.withLock { $0 }
    }

    private func produce(_ p: Int, port: Int, recorder: HistoryRecorder, deadline: Date) throws -> Stats {
        var stats = Stats()
        var queue: [Int] = Array(stride(from: p, to: events, by: producers)).reversed()  // popLast = next to send
        var everSent = Set<Int>()
        var connectedOnce = false
        while !queue.isEmpty {
            guard Date() < deadline else { throw ExperimentError("\(queue.count) events still unacknowledged at the deadline") }
            let client: WireClient
            do {
                client = try WireClient(port: port)
                guard try client.request(#"{"op":"hello"}"#, timeoutMilliseconds: 30_000)["ok"] == true else { continue }
            } catch {
                usleep(20_000)
                continue
            }
            if connectedOnce { stats.reconnects += 1 }
            connectedOnce = true
            var outstanding: [Int] = []   // sent on this connection, replies pending, in order
            var head = 0
            var pauseUntil = Date.distantPast
            do {
                while !queue.isEmpty || head < outstanding.count {
                    if Date() >= pauseUntil {
                        var chunk = ""
                        while !queue.isEmpty && outstanding.count - head < window {
                            let i = queue.removeLast()
                            if everSent.insert(i).inserted {
                                stats.sent += 1
                                recorder.sent(key(i), payload: payload(i), deliverAt: deliverAt?(i))
                            } else {
                                stats.resent += 1
                            }
                            outstanding.append(i)
                            chunk += line(i) + "\n"
                        }
                        if !chunk.isEmpty { try client.sendRaw(Array(chunk.utf8)) }
                    }
                    guard head < outstanding.count else { usleep(10_000); continue }
                    let reply = try client.readJSON(timeoutMilliseconds: 30_000)
                    let i = outstanding[head]
                    head += 1
                    if reply["rid"]?.intValue != Int64(i) { throw ExperimentError("reply out of order: expected rid \(i), got \(reply.canonicalString)") }
                    if reply["ok"] == true {
                        let duplicate = reply["duplicate"] == true
                        stats.acked += 1
                        if duplicate { stats.duplicates += 1 }
                        recorder.acked(key(i), seq: reply["seq"]?.intValue ?? 0, duplicate: duplicate)
                    } else if reply["error"]?["code"] == "store_unavailable" {
                        stats.unavailable += 1
                        queue.append(i)   // re-send soon, same id
                        pauseUntil = Date().addingTimeInterval(0.05)
                    } else {
                        stats.rejected += 1
                        throw ExperimentError("submit \(i) refused: \(reply.canonicalString)")
                    }
                }
            } catch let e as ExperimentError {
                throw e
            } catch {
                // The connection died (the service was killed): re-send what has no reply, same ids.
                queue.append(contentsOf: outstanding[head...].reversed())
            }
        }
        return stats
    }
}

/// A durable consumer on its own thread: subscribes from its acknowledged cursor, acknowledges
/// every `ackEvery` lines, and reconnects whenever the connection dies, until `stop(at:)`.
public final class ResumingConsumer: @unchecked Sendable {
    public let name: String
    private let port: Int
    private let recorder: HistoryRecorder
    private let ackEvery: Int
    private let stopAt = Atomic<Int64>(Int64.max)
    private let crashRequested = Atomic<Bool>(false)
    private let highest = Atomic<Int64>(0)
    private let done = DispatchSemaphore(value: 0)
    public private(set) var sessions = 0

    public init(name: String, port: Int, recorder: HistoryRecorder, ackEvery: Int = 200) {
        self.name = name; self.port = port; self.recorder = recorder; self.ackEvery = ackEvery
        let thread = Thread { [self] in self.loop() }
        thread.start()
    }

    /// Simulates a crash of the consumer process: it drops its connection without acknowledging
    /// what it received since its last ack, and starts again from its durable cursor.
    public func crash() { crashRequested.store(true, ordering: .relaxed) }

    /// The highest cursor received so far.
    public var highestCursor: Int64 { highest.load(ordering: .relaxed) }

    /// Stops once every cursor up to `head` was received (or after `timeoutSeconds`); returns whether it got there.
    public func stop(at head: Int64, timeoutSeconds: Double = 60) -> Bool {
        stopAt.store(head, ordering: .relaxed)
        return done.wait(timeout: .now() + timeoutSeconds) == .success
    }

    private func loop() {
        defer { done.signal() }
        while highest.load(ordering: .relaxed) < stopAt.load(ordering: .relaxed) {
            guard let client = try? WireClient(port: port),
                  (try? client.request(#"{"op":"hello"}"#))?["ok"] == true else { usleep(20_000); continue }
            let session = recorder.consumerSubscribed(name)
            sessions += 1
            var sinceAck = 0
            var last: Int64 = 0
            do {
                // Resume from the durable cursor; before the first confirmed ack the name may be
                // unknown to the server, and an unknown consumer starts at the tail: ask for all.
                let from = recorder.consumerConfirmed(name) > 0 ? #""committed""# : #""earliest""#
                try client.send(#"{"op":"subscribe","consumer":"\#(name)","from":\#(from)}"#)
                while highest.load(ordering: .relaxed) < stopAt.load(ordering: .relaxed) {
                    if crashRequested.exchange(false, ordering: .relaxed) { break }
                    guard let raw = try client.readLine(timeoutMilliseconds: 200) else {
                        if sinceAck > 0 { try ack(client, last); sinceAck = 0 }
                        continue
                    }
                    let v = try JSONValue.parse(raw)
                    if v["op"] == "delivery", let cursor = v["cursor"]?.intValue {
                        recorder.received(name, session: session, cursor: cursor, user: v["user"]?.stringValue ?? "",
                                          notification: v["notification"]?.stringValue, causeSeq: v["causeSeq"]?.intValue ?? 0)
                        last = cursor
                        if cursor > highest.load(ordering: .relaxed) { highest.store(cursor, ordering: .relaxed) }
                        sinceAck += 1
                        if sinceAck >= ackEvery { try ack(client, last); sinceAck = 0 }
                        if crashRequested.exchange(false, ordering: .relaxed) { break }
                    } else if let c = v["cursor"]?.intValue, v["op"] == nil, v["ok"] == true {
                        recorder.consumerAcked(name, cursor: c)   // an ack's reply: the durable cursor
                    } else if v["ok"] == false {
                        usleep(100_000)
                        break   // e.g. store_unavailable on subscribe (PostgreSQL down): reconnect
                    }
                }
            } catch {}
            client.close()
        }
    }

    private func ack(_ client: WireClient, _ cursor: Int64) throws {
        recorder.consumerSentAck(name, cursor: cursor)
        try client.send(#"{"op":"ack","consumer":"\#(name)","cursor":\#(cursor)}"#)
    }
}
