// The consumer's protocol state: deliveries buffered for the reader, batched acks per partition, resuming after a reconnect.

/// Where a new subscription starts.
public enum SubscribeStart: Sendable, Hashable {
    /// After the consumer's acknowledged cursor (a name never seen before starts at the head).
    case committed
    /// From the first delivery.
    case earliest
    /// The deliveries after this cursor.
    case after(Int64)

    var json: HeraldJSON {
        switch self {
        case .committed: return "committed"
        case .earliest: return "earliest"
        case .after(let cursor): return .int(cursor)
        }
    }
}

/// Which deliveries the reader sees; lines left out still advance the consumer's cursor.
public struct DeliveryFilter: Sendable, Hashable {
    public var apps: [String]?
    public var kinds: [DeliveryKind]?
    public init(apps: [String]? = nil, kinds: [DeliveryKind]? = nil) { self.apps = apps; self.kinds = kinds }

    func admits(_ d: DeliveryLine) -> Bool {
        if let apps, !(d.app.map(apps.contains) ?? false) { return false }
        if let kinds, !kinds.contains(d.kind) { return false }
        return true
    }

    var json: HeraldJSON {
        var o: [String: HeraldJSON] = [:]
        if let apps { o["apps"] = .array(apps.map(HeraldJSON.string)) }
        if let kinds { o["kinds"] = .array(kinds.map { .string($0.rawValue) }) }
        return .object(o)
    }
}

/// Pure state (no I/O; the time comes in with the events). Events are `…Received/…Established/…Lost/…Requested/…Ticked`;
/// actions come out for the subscription to perform. Generic over the reader's handle so tests can use plain values.
struct SubscriptionState<Reader> {
    enum Action {
        case wake
        /// Hand the reader deliveries (one or more, in order), the end of the stream (nil), or the error that ended it.
        case deliver(Reader, Result<[DeliveryLine]?, HeraldError>)
        /// The first subscribe was answered (or refused).
        case started(Result<Int64, HeraldError>)
        /// Every ack sent was answered (after `closeRequested`).
        case acksSettled
    }

    private enum Owed { case subscribe, ack(partition: Int, cursor: Int64), ping }

    let consumer: String
    let start: SubscribeStart
    let filter: DeliveryFilter?
    /// An ephemeral stream: acknowledges nothing, moves no cursor, takes no consumer's place
    /// (under a name it starts at that consumer's cursor; an empty name reads from `start`).
    let ephemeral: Bool
    let ackEvery: Int
    let ackIntervalMilliseconds: UInt64
    /// Deliveries count as processed only when `ackRequested` says so (not when the next is asked
    /// for, nor on close): for a reader whose work completes elsewhere, later and out of band.
    let manualAcks: Bool
    /// Lines buffered for the reader before the socket stops being read.
    let bufferLimit: Int

    private var buffer: [DeliveryLine] = []
    private var head = 0
    private var lastReceived: [Int: Int64] = [:]
    private var processed: [Int: Int64] = [:]
    private var ackSent: [Int: Int64] = [:]
    private(set) var acked: [Int: Int64] = [:]
    /// Partitions whose lines named `partition` (their acks name it too).
    private var named: Set<Int> = []
    private var unackedLines = 0
    private var lastAckAt: UInt64 = 0
    private var lastWriteAt: UInt64 = 0
    private var owed: [Owed] = []
    private var outbox: [UInt8] = []
    private var nextRid: Int64 = 1
    private var connected = false
    private var started = false
    private(set) var ended: HeraldError?
    /// The first subscribe's reply: the cursor the stream started after.
    private(set) var startedAt: Int64?
    private var closing = false
    /// Handed to the reader last: processed when it asks for more (or closes).
    private var yielded: [DeliveryLine] = []
    private var reader: (handle: Reader, deadline: UInt64?, most: Int)?

    init(consumer: String, start: SubscribeStart, filter: DeliveryFilter?, ackEvery: Int, ackIntervalMilliseconds: Int,
         bufferLimit: Int = 8192, ephemeral: Bool = false, manualAcks: Bool = false) {
        self.consumer = consumer; self.start = start; self.filter = filter; self.ephemeral = ephemeral; self.manualAcks = manualAcks
        self.ackEvery = max(1, ackEvery); self.ackIntervalMilliseconds = UInt64(max(1, ackIntervalMilliseconds))
        self.bufferLimit = bufferLimit
    }

    var wantsToRead: Bool { buffer.count - head < bufferLimit }
    var buffered: Int { buffer.count - head }

    private mutating func write(_ members: [String: HeraldJSON], op: String, owed what: Owed, now: UInt64, actions: inout [Action]) {
        var w = JSONWriter(capacity: 128)
        w.beginObject()
        w.member("op", op)
        w.member("rid", nextRid)
        for k in members.keys.sorted() { w.member(k, members[k]) }
        w.endObject()
        w.bytes.append(0x0A)
        nextRid += 1
        owed.append(what)
        lastWriteAt = now
        if outbox.isEmpty { actions.append(.wake) }
        outbox.append(contentsOf: w.bytes)
    }

    private mutating func sendAck(partition: Int, cursor: Int64, now: UInt64, actions: inout [Action]) {
        var members: [String: HeraldJSON] = ["consumer": .string(consumer), "cursor": .int(cursor)]
        if named.contains(partition) { members["partition"] = .int(Int64(partition)) }
        ackSent[partition] = cursor
        write(members, op: "ack", owed: .ack(partition: partition, cursor: cursor), now: now, actions: &actions)
    }

    /// A granted hello. The first time: subscribe from `start`. After a reconnect: with one
    /// partition, after the newest line received (lines buffered are not asked for again); with
    /// several, ack what was processed, then subscribe from the committed cursors (lines
    /// received twice are dropped by cursor); an ephemeral stream with several partitions, which
    /// has no committed cursors, subscribes from `start` again and drops what it received.
    mutating func connectionEstablished(now: UInt64) -> [UInt8] {
        connected = true
        outbox = []
        owed = []
        var actions: [Action] = []
        ackSent = acked
        var from = start
        if started {
            if named.isEmpty {
                if let last = lastReceived[0] { from = .after(last) }
            } else if !ephemeral {
                for (p, cursor) in processed.sorted(by: { $0.key < $1.key }) where cursor > (acked[p] ?? -1) {
                    sendAck(partition: p, cursor: cursor, now: now, actions: &actions)
                }
                from = .committed
            }
        }
        var members: [String: HeraldJSON] = ["from": from.json]
        if !ephemeral || !consumer.isEmpty { members["consumer"] = .string(consumer) }
        if ephemeral { members["ephemeral"] = true }
        if let filter { members["filter"] = filter.json }
        write(members, op: "subscribe", owed: .subscribe, now: now, actions: &actions)
        return takeOutbox()
    }

    mutating func connectionLost() {
        connected = false
        outbox = []
        owed = []
    }

    mutating func takeOutbox() -> [UInt8] {
        defer { outbox = [] }
        return outbox
    }

    /// A delivery line on the subscription's connection.
    mutating func deliveryReceived(_ d: DeliveryLine, actions: inout [Action]) {
        if d.namesPartition { named.insert(d.partition) }
        if let last = lastReceived[d.partition], d.cursor <= last { return }
        lastReceived[d.partition] = d.cursor
        if let filter, !filter.admits(d) {
            // With manual acks a line left out moves no cursor: the reader's next ack covers it.
            if !manualAcks { processedUpTo(d) }
            return
        }
        if let r = reader, head == buffer.count {
            reader = nil
            yielded = [d]
            actions.append(.deliver(r.handle, .success([d])))
        } else {
            buffer.append(d)
        }
    }

    /// Any other line on the subscription's connection: a reply to a subscribe, an ack or a ping,
    /// or the server's own error. Returns the error that ends the subscription, if it is one.
    mutating func lineReceived(_ json: [String: HeraldJSON], actions: inout [Action]) -> HeraldError? {
        guard json["ok"] != nil else { return nil }
        let ok = json["ok"]?.boolValue == true
        guard json["rid"] != nil, !owed.isEmpty else {
            // The server's own error about the connection (`grant_revoked`, …).
            let error = HeraldError(reply: json)
            return ok || !error.isFinal ? nil : error
        }
        switch owed.removeFirst() {
        case .subscribe:
            if ok {
                if !started {
                    started = true
                    startedAt = json["cursor"]?.intValue ?? 0
                    actions.append(.started(.success(startedAt!)))
                }
            } else {
                let error = HeraldError(reply: json)
                if !started { actions.append(.started(.failure(error))) }
                return error
            }
        case .ack(let p, let cursor):
            if ok {
                let stored = json["cursor"]?.intValue ?? cursor
                if stored > (acked[p] ?? -1) { acked[p] = stored }
            }
            if closing && !owed.contains(where: { if case .ack = $0 { return true }; return false }) { actions.append(.acksSettled) }
        case .ping:
            break
        }
        return nil
    }

    private mutating func processedUpTo(_ d: DeliveryLine) {
        if d.cursor > (processed[d.partition] ?? -1) {
            processed[d.partition] = d.cursor
            unackedLines += 1
        }
    }

    /// The reader asks for the next deliveries (at most `most`, at least one): those handed out before are processed.
    mutating func nextRequested(reader handle: Reader, most: Int = 1, deadline: UInt64?, now: UInt64, actions: inout [Action]) {
        if reader != nil {
            actions.append(.deliver(handle, .failure(HeraldError(code: "concurrent_next", title: "Another task is already waiting for this consumer's next delivery",
                                                                 detail: "A consumer has one reader: iterate it from one task, and hand deliveries on from there."))))
            return
        }
        if !yielded.isEmpty {
            if !manualAcks { for d in yielded { processedUpTo(d) } }
            yielded = []
            if unackedLines >= ackEvery && connected { flushAcks(now: now, actions: &actions) }
        }
        if head < buffer.count {
            let before = buffer.count - head
            let end = Swift.min(buffer.count, head + Swift.max(1, most))
            yielded = Array(buffer[head..<end])
            head = end
            if head == buffer.count { buffer.removeAll(keepingCapacity: true); head = 0 } else if head > 4096 { buffer.removeSubrange(..<head); head = 0 }
            actions.append(.deliver(handle, .success(yielded)))
            if before > bufferLimit / 2 && buffer.count - head <= bufferLimit / 2 { actions.append(.wake) }  // reading may resume
            return
        }
        if let ended {
            actions.append(.deliver(handle, ended.code == HeraldError.closed.code ? .success(nil) : .failure(ended)))
            return
        }
        reader = (handle, deadline, most)
    }

    /// With manual acks: the reader is done with `partition`'s deliveries up to `cursor`. The ack
    /// goes out with the next batch (`ackEvery` lines, `ackIntervalMilliseconds`, a flush or the close).
    mutating func ackRequested(partition: Int, cursor: Int64, now: UInt64, actions: inout [Action]) {
        guard cursor > (processed[partition] ?? -1) else { return }
        processed[partition] = cursor
        unackedLines += 1
        if unackedLines >= ackEvery && connected { flushAcks(now: now, actions: &actions) }
    }

    /// Acks the newest processed cursor of each partition that moved since its last ack.
    mutating func flushAcks(now: UInt64, actions: inout [Action]) {
        guard !ephemeral else { unackedLines = 0; return }
        for (p, cursor) in processed.sorted(by: { $0.key < $1.key }) where cursor > (ackSent[p] ?? -1) {
            sendAck(partition: p, cursor: cursor, now: now, actions: &actions)
        }
        unackedLines = 0
        lastAckAt = now
    }

    /// Time passes: acks every `ackIntervalMilliseconds`, a ping after a minute without writing
    /// (the server closes a connection silent for 5 minutes), and the reader's time-out.
    mutating func ticked(now: UInt64, actions: inout [Action]) {
        if connected && started {
            if unackedLines > 0 && now - lastAckAt >= ackIntervalMilliseconds { flushAcks(now: now, actions: &actions) }
            if now - lastWriteAt >= 60_000 { write([:], op: "ping", owed: .ping, now: now, actions: &actions) }
        }
        if let r = reader, let deadline = r.deadline, now >= deadline {
            reader = nil
            actions.append(.deliver(r.handle, .failure(HeraldError(code: "timeout", title: "No delivery within the time given", detail: ""))))
        }
    }

    /// `close()`: the delivery handed out last is processed; acks go out now. Returns whether
    /// any ack is still unanswered (an `acksSettled` action follows).
    mutating func closeRequested(now: UInt64, actions: inout [Action]) -> Bool {
        closing = true
        if !manualAcks { for d in yielded { processedUpTo(d) } }
        yielded = []
        if connected { flushAcks(now: now, actions: &actions) }
        return connected && owed.contains(where: { if case .ack = $0 { return true }; return false })
    }

    /// The session will not come back: a waiting reader gets the end (closed) or the error.
    mutating func sessionEnded(_ error: HeraldError, actions: inout [Action]) {
        if ended == nil { ended = error }
        connected = false
        if !started { actions.append(.started(.failure(error))) }
        if let r = reader {
            reader = nil
            if head < buffer.count {
                yielded = Array(buffer[head..<Swift.min(buffer.count, head + r.most)])
                head += yielded.count
                actions.append(.deliver(r.handle, .success(yielded)))
            } else {
                actions.append(.deliver(r.handle, error.code == HeraldError.closed.code ? .success(nil) : .failure(error)))
            }
        }
        if closing { actions.append(.acksSettled) }
    }
}

extension SubscriptionState: Sendable where Reader: Sendable {}
extension SubscriptionState.Action: Sendable where Reader: Sendable {}
