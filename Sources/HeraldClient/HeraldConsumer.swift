// The consumer: an AsyncSequence of typed deliveries with batched acks, resuming after reconnects.
import Synchronization

/// A durable consumer's stream. Iterate it (`for try await delivery in consumer`): a delivery
/// counts as processed once the loop asks for the next one; processed cursors are acked every
/// `ackEvery` lines or `ackIntervalMilliseconds`, and on `close()`. After a dropped connection or
/// a goodbye it reconnects and resumes after the last line it received: nothing skipped, nothing
/// twice. The sequence ends (nil) after `close()`, and throws the `HeraldError` that ended it
/// otherwise (`grant_revoked`, a refused hello, giving up reconnecting).
public final class HeraldConsumer: AsyncSequence, SessionHandler {
    public typealias Element = Delivery
    typealias State = SubscriptionState<UnsafeContinuation<Result<[DeliveryLine]?, HeraldError>, Never>>

    private let session: WireSession
    private let state: Mutex<State>
    private let waiters = Mutex<(started: UnsafeContinuation<Result<Int64, HeraldError>, Never>?, acks: UnsafeContinuation<Void, Never>?)>((nil, nil))
    private let ackTick: Int32

    /// The durable name; empty for an ephemeral stream without one.
    public let consumer: String

    private init(endpoint: Endpoint, state: State) {
        session = WireSession(endpoint: endpoint)
        self.state = Mutex(state)
        consumer = state.consumer
        ackTick = Int32(Swift.min(Swift.max(state.ackIntervalMilliseconds / 2, 10), 1_000))
    }

    /// Connects, says hello and subscribes; returns once the subscribe is answered (its refusal is thrown).
    /// `manualAcks`: a delivery counts as processed only once `ack(_:)` says so, not when the next
    /// is asked for (for a reader whose work completes later, e.g. a broker's confirmation).
    public static func subscribe(host: String = "127.0.0.1", port: Int = 7411, token: String? = nil, tls: TLSOptions? = nil,
                                 consumer: String, from start: SubscribeStart = .committed, filter: DeliveryFilter? = nil,
                                 ackEvery: Int = 256, ackIntervalMilliseconds: Int = 200,
                                 backoff: Backoff = Backoff(), manualAcks: Bool = false) async throws(HeraldError) -> HeraldConsumer {
        let state = State(consumer: consumer, start: start, filter: filter, ackEvery: ackEvery, ackIntervalMilliseconds: ackIntervalMilliseconds,
                          manualAcks: manualAcks)
        return try await started(Endpoint(host: host, port: port, token: token, tls: tls, backoff: backoff), state)
    }

    private static func started(_ endpoint: Endpoint, _ state: State) async throws(HeraldError) -> HeraldConsumer {
        let c = HeraldConsumer(endpoint: endpoint, state: state)
        let result = await withUnsafeContinuation { continuation in
            c.waiters.withLock { $0.started = continuation }
            c.session.start(handler: c)
        }
        _ = try result.get()
        return c
    }

    /// An ephemeral stream: reads deliveries without acknowledging them, so it moves no cursor and
    /// takes no consumer's place. Under a `consumer`'s name it starts at that consumer's
    /// acknowledged cursor (unless `from` names a cursor or `earliest`); without one, `.committed`
    /// means the newest delivery. It reconnects and resumes as a durable consumer does.
    public static func stream(host: String = "127.0.0.1", port: Int = 7411, token: String? = nil, tls: TLSOptions? = nil,
                              consumer: String? = nil, from start: SubscribeStart = .committed, filter: DeliveryFilter? = nil,
                              backoff: Backoff = Backoff()) async throws(HeraldError) -> HeraldConsumer {
        let state = State(consumer: consumer ?? "", start: start, filter: filter, ackEvery: Int.max, ackIntervalMilliseconds: 1_000, ephemeral: true)
        return try await started(Endpoint(host: host, port: port, token: token, tls: tls, backoff: backoff), state)
    }

    /// `address` is "host:port".
    public static func subscribe(address: String, token: String? = nil, tls: TLSOptions? = nil, consumer: String,
                                 from start: SubscribeStart = .committed, filter: DeliveryFilter? = nil, ackEvery: Int = 256,
                                 ackIntervalMilliseconds: Int = 200, backoff: Backoff = Backoff()) async throws(HeraldError) -> HeraldConsumer {
        let (host, port) = try HeraldProducer.splitAddress(address)
        return try await subscribe(host: host, port: port, token: token, tls: tls, consumer: consumer, from: start, filter: filter,
                                   ackEvery: ackEvery, ackIntervalMilliseconds: ackIntervalMilliseconds, backoff: backoff)
    }

    /// The next delivery; nil once closed. With `timeoutMilliseconds`, throws `timeout` when none comes in time.
    public func next(timeoutMilliseconds: Int? = nil) async throws(HeraldError) -> Delivery? {
        try await nextLines(most: 1, timeoutMilliseconds: timeoutMilliseconds)?[0].decoded()
    }

    /// The next deliveries undecoded, in order: every one buffered up to `most`, waiting for at
    /// least one; nil once closed. For a reader that passes lines on as they are (a broker
    /// bridge): the session's thread has read only their routing members, and nothing is parsed
    /// unless `decoded()` is called. They count as processed as `next()`'s do.
    public func nextLines(most: Int = 256, timeoutMilliseconds: Int? = nil) async throws(HeraldError) -> [DeliveryLine]? {
        let now = monotonicMilliseconds()
        let result = await withUnsafeContinuation { (continuation: UnsafeContinuation<Result<[DeliveryLine]?, HeraldError>, Never>) in
            var actions: [State.Action] = []
            state.withLock {
                $0.nextRequested(reader: continuation, most: most, deadline: timeoutMilliseconds.map { now + UInt64(Swift.max(0, $0)) }, now: now,
                                 actions: &actions)
            }
            perform(actions)
        }
        return try result.get()
    }

    /// With `manualAcks`: `delivery`, and every earlier one of its partition, is processed; the ack
    /// goes out with the next batch (or `flushAcks()`, or `close()`).
    public func ack(_ delivery: Delivery) { ack(partition: delivery.partition, cursor: delivery.cursor) }

    /// With `manualAcks`: `line`, and every earlier one of its partition, is processed.
    public func ack(_ line: DeliveryLine) { ack(partition: line.partition, cursor: line.cursor) }

    /// With `manualAcks`: `partition`'s deliveries up to `cursor` are processed.
    public func ack(partition: Int, cursor: Int64) {
        var actions: [State.Action] = []
        state.withLock { $0.ackRequested(partition: partition, cursor: cursor, now: monotonicMilliseconds(), actions: &actions) }
        perform(actions)
    }

    /// The cursor the first subscribe's reply named: the stream starts after it.
    public var subscribedAfter: Int64 { state.withLock { $0.startedAt ?? 0 } }

    /// Sends the acks of what was processed now, without waiting for their replies.
    public func flushAcks() {
        var actions: [State.Action] = []
        state.withLock { $0.flushAcks(now: monotonicMilliseconds(), actions: &actions) }
        perform(actions)
    }

    /// The cursor acknowledged by the server, per partition.
    public var acknowledged: [Int: Int64] { state.withLock { $0.acked } }

    /// Acks what was processed (and the delivery handed out last), waits up to 10 s for those
    /// acks' replies, then closes the connection.
    public func close() async {
        var actions: [State.Action] = []
        await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
            waiters.withLock { $0.acks = continuation }
            let waiting = state.withLock { $0.closeRequested(now: monotonicMilliseconds(), actions: &actions) }
            perform(actions)
            if !waiting { settleAcks() }
            else {
                Task { [self] in
                    try? await Task.sleep(for: .seconds(10))
                    settleAcks()
                }
            }
        }
        session.stop()
    }

    private func settleAcks() {
        waiters.withLock { w in defer { w.acks = nil }; return w.acks }?.resume()
    }

    private func perform(_ actions: [State.Action]) {
        for action in actions {
            switch action {
            case .wake: session.wake()
            case .deliver(let reader, let result): reader.resume(returning: result)
            case .started(let result): waiters.withLock { w in defer { w.started = nil }; return w.started }?.resume(returning: result)
            case .acksSettled: settleAcks()
            }
        }
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let consumer: HeraldConsumer
        public mutating func next() async throws(HeraldError) -> Delivery? { try await consumer.next() }
        public mutating func next(isolation actor: isolated (any Actor)?) async throws(HeraldError) -> Delivery? { try await consumer.next() }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(consumer: self) }

    // MARK: SessionHandler (the session's thread)

    func sessionConnected(_ hello: HelloReply, isReconnect: Bool) -> [UInt8] {
        state.withLock { $0.connectionEstablished(now: monotonicMilliseconds()) }
    }

    func deliveryReceived(_ delivery: DeliveryLine) {
        var actions: [State.Action] = []
        state.withLock { $0.deliveryReceived(delivery, actions: &actions) }
        perform(actions)
    }

    func lineReceived(_ line: [UInt8], _ json: [String: HeraldJSON]) -> HeraldError? {
        var actions: [State.Action] = []
        let end = state.withLock { $0.lineReceived(json, actions: &actions) }
        perform(actions)
        return end
    }

    func replyReceived(_ line: [UInt8], _ head: ReplyHead) -> HeraldError? {
        guard case .object(let json)? = try? HeraldJSON.parse(line) else { return nil }
        return lineReceived(line, json)
    }

    func sessionDisconnected() { state.withLock { $0.connectionLost() } }

    func sessionEnded(_ error: HeraldError) {
        var actions: [State.Action] = []
        state.withLock { $0.sessionEnded(error, actions: &actions) }
        perform(actions)
    }

    func takeOutgoing() -> [UInt8] { state.withLock { $0.takeOutbox() } }
    var wantsToRead: Bool { state.withLock { $0.wantsToRead } }

    func ticked(nowMilliseconds: UInt64) {
        var actions: [State.Action] = []
        state.withLock { $0.ticked(now: nowMilliseconds, actions: &actions) }
        perform(actions)
    }

    var tickMilliseconds: Int32 { ackTick }
}
