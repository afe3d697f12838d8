// `herald bridge nats`: a durable Herald consumer that publishes every delivery to NATS JetStream and acks after JetStream stored it.
import CNats
import Dispatch
import Foundation
import Glibc
import HeraldClient
import HeraldCore
import Synchronization

/// What the bridge connects to and how it publishes.
public struct NatsBridgeOptions: Sendable {
    public var heraldHost = "127.0.0.1"
    public var heraldPort = 7411
    public var token: String?
    public var tls: TLSOptions?
    public var consumer = "nats-bridge"
    public var natsURL = "nats://127.0.0.1:4222"
    public var stream = "HERALD"
    public var subjectPrefix = "herald"
    /// The most publishes unconfirmed at once.
    public var window = 1_024
    /// The stream's duplicate window, at least (created so; an existing stream with less is refused).
    public var duplicateWindowSeconds: Int64 = 120
    /// How long a publish waits for JetStream's confirmation before the session starts again.
    public var ackWaitMilliseconds: Int64 = 5_000
    public init() {}
}

/// Set by SIGTERM and SIGINT: the bridge stops reading, waits for the publishes in flight, acks them and exits.
nonisolated(unsafe) private var stopRequested: sig_atomic_t = 0

/// The bridge. Each session: connect to NATS, check or create the stream, read the newest stored
/// message id (what the stream holds already is passed over, not re-published), subscribe to
/// Herald from the consumer's acknowledged cursor (HeraldClient's consumer, acking only what it is
/// told), then publish each delivery asynchronously (at most `window` unconfirmed) and ack Herald's
/// cursor once JetStream confirmed every delivery up to it. A dropped Herald connection is resumed
/// by the consumer after the last line it received; any other failure ends the session, the next
/// starts from Herald's acknowledged cursor, and the stream's deduplication by `Nats-Msg-Id` drops
/// what it stored already. Sessions run one at a time, each as one task: hence `@unchecked Sendable`.
public final class NatsBridge: @unchecked Sendable {
    let options: NatsBridgeOptions
    let log: (String) -> Void
    /// Deliveries published and confirmed over every session (progress lines).
    private var confirmedTotal = 0
    private var lastProgress = Date()

    public init(options: NatsBridgeOptions, log: @escaping (String) -> Void) {
        self.options = options
        self.log = log
    }

    /// Runs sessions until SIGTERM or SIGINT; returns after a clean stop.
    public func run() {
        signal(SIGTERM) { _ in stopRequested = 1 }
        signal(SIGINT) { _ in stopRequested = 1 }
        signal(SIGPIPE, SIG_IGN)
        // A parent that spawned this process with them blocked (its own thread's mask is
        // inherited) would leave a SIGTERM pending forever.
        var stops = sigset_t()
        sigemptyset(&stops)
        sigaddset(&stops, SIGTERM)
        sigaddset(&stops, SIGINT)
        pthread_sigmask(SIG_UNBLOCK, &stops, nil)
        var backoff = 250
        while stopRequested == 0 {
            let before = confirmedTotal
            do {
                try Self.waitFor { try await self.session() }
                return  // a clean stop
            } catch {
                if confirmedTotal > before { backoff = 250 }
                log("warning: bridge session ended: \(error); starting again in \(backoff) ms")
                let until = Date().addingTimeInterval(Double(backoff) / 1000)
                while stopRequested == 0 && Date() < until { usleep(20_000) }
                backoff = min(backoff * 2, 5_000)
            }
        }
    }

    struct HeraldFailure: Error, CustomStringConvertible { let description: String }

    private func session() async throws {
        let nats = try NatsJetStream(url: options.natsURL, maxPending: options.window, ackWaitMilliseconds: options.ackWaitMilliseconds)
        defer { nats.close() }
        let subject = options.subjectPrefix + ".>"
        let state = try nats.ensureStream(options.stream, subject: subject, duplicateWindowSeconds: options.duplicateWindowSeconds)
        var stored: [Int64: Int64] = [:]
        if state.lastSequence > 0, let id = try nats.message(options.stream, at: state.lastSequence).id,
           let newest = DeliveryPosition(messageID: id) {
            stored[newest.partition ?? 0] = newest.cursor
        }
        log(state.created ? "created JetStream stream \(options.stream) (file storage, subjects \(subject), duplicate window \(options.duplicateWindowSeconds) s)"
            : "JetStream stream \(options.stream): \(state.messages) messages, newest \(stored.map { "\($0.key):\($0.value)" }.first ?? "none")")

        let consumer = try await HeraldConsumer.subscribe(
            host: options.heraldHost, port: options.heraldPort, token: options.token, tls: options.tls, consumer: options.consumer,
            // Acks are sent when the window says (below); a Herald that stays away ends the session.
            ackEvery: Int.max, ackIntervalMilliseconds: 20, backoff: Backoff(initialMilliseconds: 250, maximumMilliseconds: 5_000, attempts: 5),
            manualAcks: true)
        do {
            try await bridge(consumer, nats, stored: stored)
        } catch {
            await consumer.close()  // it acks what JetStream confirmed, nothing else
            throw error
        }
    }

    /// Reads deliveries from `consumer` and publishes them until a failure (thrown) or a stop.
    private func bridge(_ consumer: HeraldConsumer, _ nats: NatsJetStream, stored: [Int64: Int64]) async throws {
        log("subscribed to Herald at \(options.heraldHost):\(options.heraldPort) as \(options.consumer) from cursor \(consumer.subscribedAfter)")
        var window = BridgeWindow(capacity: options.window, storedThrough: stored)
        /// Subjects by app and kind, built once each.
        var subjects: [String?: [String: String]] = [:]
        var lastAckSent = Date()
        func sendAcks() {
            for p in window.takeAcks() { consumer.ack(partition: Int(p.partition ?? 0), cursor: p.cursor) }
            consumer.flushAcks()
            lastAckSent = Date()
        }
        while true {
            let stopping = stopRequested != 0
            let (confirmed, failure) = nats.confirmations(waitingUpTo: window.hasRoom && !stopping ? 0 : 20)
            if let failure { throw NatsFailure(failure) }
            for id in confirmed {
                guard let position = DeliveryPosition(messageID: id) else { continue }
                window.publishConfirmed(position)
            }
            confirmedTotal += confirmed.count
            if window.hasAcks && (window.inFlight == 0 || Date().timeIntervalSince(lastAckSent) >= 0.02) { sendAcks() }
            if stopping {
                guard window.inFlight == 0 else { continue }
                sendAcks()
                // The close waits for the acks' replies, so Herald has stored them before the connection closes.
                await consumer.close()
                log("stopped: every delivery read was confirmed by JetStream and acknowledged")
                return
            }
            if Date().timeIntervalSince(lastProgress) >= 10 {
                lastProgress = Date()
                log("bridged \(confirmedTotal) deliveries to \(options.stream) (\(window.inFlight) in flight)")
            }
            guard window.hasRoom else { continue }
            // The lines undecoded: the consumer's scan read their routing members, the bytes go to JetStream as they came.
            let lines = try await Self.next(consumer, most: window.capacity - window.inFlight,
                                            withinMilliseconds: window.inFlight > 0 || window.hasAcks ? 5 : 200)
            for line in lines {
                let position = DeliveryPosition(partition: line.namesPartition ? Int64(line.partition) : nil, cursor: line.cursor)
                switch window.deliveryReceived(position) {
                case .passOver: continue
                case .publish(let p):
                    let kind = line.kind.rawValue.isEmpty ? "unknown" : line.kind.rawValue
                    let subject: String
                    if let known = subjects[line.app]?[kind] {
                        subject = known
                    } else {
                        subject = Self.subject(prefix: options.subjectPrefix, app: line.app, kind: kind)
                        subjects[line.app, default: [:]][kind] = subject
                    }
                    try line.bytes.withUnsafeBytes { try nats.publish(subject: subject, payload: $0, id: p.messageID) }
                }
            }
        }
    }

    /// The consumer's next lines (at most `most`); none when none came in time.
    private static func next(_ consumer: HeraldConsumer, most: Int, withinMilliseconds limit: Int) async throws -> [DeliveryLine] {
        let result: Result<[DeliveryLine]?, HeraldError>
        do throws(HeraldError) { result = .success(try await consumer.nextLines(most: most, timeoutMilliseconds: limit)) } catch { result = .failure(error) }
        switch result {
        case .success(let lines?): return lines
        case .success(nil): throw HeraldFailure(description: "the Herald consumer closed")
        case .failure(let error) where error.code == "timeout": return []
        case .failure(let error): throw error
        }
    }

    /// Runs `body` on the concurrency runtime and waits for it on this thread (the bridge's own).
    private static func waitFor(_ body: @escaping @Sendable () async throws -> Void) throws {
        let outcome = Mutex<Result<Void, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task {
            let result: Result<Void, any Error>
            do { try await body(); result = .success(()) } catch { result = .failure(error) }
            outcome.withLock { $0 = result }
            done.signal()
        }
        done.wait()
        try outcome.withLock { $0! }.get()
    }

    /// `<prefix>.<app>.<kind>`: the app as it is (its dots make subject tokens, so a reverse-DNS
    /// app is a subject hierarchy), `_` for a delivery without one (summary, focusDigest); bytes a
    /// subject cannot carry (spaces, `*`, `>`, empty tokens) become `_`.
    public static func subject(prefix: String, app: String?, kind: String) -> String {
        func clean(_ s: String) -> String {
            let tokens = s.split(separator: ".", omittingEmptySubsequences: false).map { token -> String in
                let t = String(token.map { $0 == " " || $0 == "\t" || $0 == "*" || $0 == ">" || $0.isNewline ? "_" : $0 })
                return t.isEmpty ? "_" : t
            }
            return tokens.joined(separator: ".")
        }
        return "\(prefix).\(clean(app ?? "_")).\(clean(kind))"
    }
}
