// `herald bridge nats`: a durable Herald consumer that publishes every delivery to NATS JetStream and acks after JetStream stored it.
import CNats
import Foundation
import Glibc
import HeraldWireTesting
import HeraldCore

/// What the bridge connects to and how it publishes.
public struct NatsBridgeOptions: Sendable {
    public var heraldHost = "127.0.0.1"
    public var heraldPort = 7411
    public var token: String?
    public var tls: TLSClientOptions?
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
/// Herald from the consumer's acknowledged cursor, then publish each delivery asynchronously (at
/// most `window` unconfirmed) and ack Herald's cursor once JetStream confirmed every delivery up
/// to it. Any failure ends the session; the next starts from Herald's acknowledged cursor, and the
/// stream's deduplication by `Nats-Msg-Id` drops what it stored already.
public final class NatsBridge {
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
                try session()
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

    private func session() throws {
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

        // The raw-line client rather than HeraldClient's consumer: the bridge scans each line for
        // its routing members only, where the consumer parses every line whole (BENCHMARKS.md).
        let herald = try WireClient(host: options.heraldHost, port: options.heraldPort, tls: options.tls)
        defer { herald.close() }
        let hello = try herald.request(#"{"op":"hello","token":\#(JSONValue.string(options.token ?? "").canonicalString)}"#)
        guard hello["ok"]?.boolValue == true else { throw HeraldFailure(description: "hello refused: \(hello.canonicalString)") }
        let subscribed = try herald.request(JSONValue.object(["op": "subscribe", "consumer": .string(options.consumer)]).canonicalString)
        guard subscribed["ok"]?.boolValue == true else { throw HeraldFailure(description: "subscribe refused: \(subscribed.canonicalString)") }
        log("subscribed to Herald at \(options.heraldHost):\(options.heraldPort) as \(options.consumer) from cursor \(subscribed["cursor"]?.intValue ?? 0)")

        var window = BridgeWindow(capacity: options.window, storedThrough: stored)
        var carriesPartition: Bool?
        /// Subjects by app and kind, built once each.
        var subjects: [String?: [String: String]] = [:]
        var lastAckSent = Date()
        let consumerJSON = JSONValue.string(options.consumer).canonicalString
        func sendAcks() throws {
            for p in window.takeAcks() {
                let partition = p.partition.map { #","partition":\#($0)"# } ?? ""
                try herald.send(#"{"op":"ack","consumer":\#(consumerJSON)\#(partition),"cursor":\#(p.cursor)}"#)
            }
            lastAckSent = Date()
        }
        while true {
            let stopping = stopRequested != 0
            let (confirmed, failure) = nats.confirmations(waitingUpTo: window.hasRoom && !stopping ? 0 : 20)
            if let failure { throw NatsFailure(failure) }
            for id in confirmed {
                guard var position = DeliveryPosition(messageID: id) else { continue }
                if carriesPartition == false { position.partition = nil }
                window.publishConfirmed(position)
            }
            confirmedTotal += confirmed.count
            if window.hasAcks && (window.inFlight == 0 || Date().timeIntervalSince(lastAckSent) >= 0.02) { try sendAcks() }
            if stopping {
                guard window.inFlight == 0 else { continue }
                let acks = window.takeAcks()
                for p in acks {
                    let partition = p.partition.map { #","partition":\#($0)"# } ?? ""
                    try herald.send(#"{"op":"ack","consumer":\#(consumerJSON)\#(partition),"cursor":\#(p.cursor)}"#)
                }
                // The acks' replies, so Herald has stored them before the connection closes (at
                // most 2 s: delivery lines keep coming meanwhile, and are not published).
                var replies = 0
                let deadline = Date().addingTimeInterval(2)
                while replies < acks.count, Date() < deadline,
                      let line = try herald.readLine(timeoutMilliseconds: Int32(max(1, deadline.timeIntervalSinceNow * 1000))) {
                    let fields = line.withUnsafeBytes { DeliveryLineFields.scan($0) }
                    if fields?.op == nil { replies += 1 }
                }
                log("stopped: every delivery read was confirmed by JetStream and acknowledged")
                return
            }
            if Date().timeIntervalSince(lastProgress) >= 10 {
                lastProgress = Date()
                log("bridged \(confirmedTotal) deliveries to \(options.stream) (\(window.inFlight) in flight)")
            }
            guard window.hasRoom else { continue }
            guard let line = try herald.readLine(timeoutMilliseconds: window.inFlight > 0 || window.hasAcks ? 5 : 200) else { continue }
            // Most lines are deliveries, read by a scan of their routing members; the rest (and any
            // line the scan leaves) are parsed in full.
            var fields = line.withUnsafeBytes { DeliveryLineFields.scan($0) } ?? DeliveryLineFields()
            if fields.op != "delivery" || fields.cursor == nil {
                let value = try JSONValue.parse(line)
                if value["ok"]?.boolValue == false { throw HeraldFailure(description: "Herald answered \(value.canonicalString)") }
                if value["op"]?.stringValue == "goodbye" {
                    throw HeraldFailure(description: "Herald is stopping (\(value["reason"]?.stringValue ?? "goodbye"))")
                }
                guard value["op"]?.stringValue == "delivery", let cursor = value["cursor"]?.intValue else { continue }  // an ack's reply
                fields = DeliveryLineFields(op: "delivery", cursor: cursor, partition: value["partition"]?.intValue,
                                            app: value["app"]?.stringValue, kind: value["kind"]?.stringValue)
            }
            if carriesPartition == nil { carriesPartition = fields.partition != nil }
            let position = DeliveryPosition(partition: fields.partition, cursor: fields.cursor!)
            switch window.deliveryReceived(position) {
            case .passOver: continue
            case .publish(let p):
                let kind = fields.kind ?? "unknown"
                let subject: String
                if let known = subjects[fields.app]?[kind] {
                    subject = known
                } else {
                    subject = Self.subject(prefix: options.subjectPrefix, app: fields.app, kind: kind)
                    subjects[fields.app, default: [:]][kind] = subject
                }
                try line.withUnsafeBytes { try nats.publish(subject: subject, payload: $0, id: p.messageID) }
            }
        }
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
