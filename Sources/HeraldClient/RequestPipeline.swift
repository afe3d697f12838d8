// The producer's protocol state: requests in flight matched to replies in order, the window, resending after a reconnect.

/// Pure state (no I/O, no clock): events come in as `…Queued/…Received/…Established/…Lost/…Ended`,
/// actions come out for the connection to perform. Generic over the caller's handles so it can be
/// tested with plain values.
struct RequestPipeline<Waiter, Admission> {
    struct InFlight {
        var rid: Int64
        var line: [UInt8]
        var waiter: Waiter
    }

    enum Action {
        /// Bytes were queued for the session while it had none: wake its thread.
        case wake
        /// A reply (or the error that ends it) for one request.
        case settle(Waiter, Result<[UInt8], HeraldError>)
        /// A caller parked for lack of room may go on: its request is now in flight.
        case admit(Admission)
    }

    let window: Int
    private(set) var nextRid: Int64 = 1
    private var inFlight: [InFlight] = []
    private var head = 0
    /// Requests waiting for room in the window, in call order (at most one per suspended caller).
    private var parked: [(body: [UInt8], waiter: Waiter, admission: Admission)] = []
    private(set) var connected = false
    private(set) var outbox: [UInt8] = []
    private(set) var ended: HeraldError?

    /// Parked callers go on once no more than this many are in flight: a caller resumed per reply
    /// would send one request per wake-up; resumed after a sixteenth of the window is answered, it
    /// sends a burst, and the window stays nearly full (what bounds acks/s is commits in flight).
    let lowWater: Int

    init(window: Int) {
        self.window = max(1, window)
        lowWater = self.window - max(1, self.window / 16)
    }

    var count: Int { inFlight.count - head }
    var hasRoom: Bool { count < window }
    /// Whether a request queued now would be admitted (or settled at once, once ended) without parking.
    var admitsNow: Bool { ended != nil || (hasRoom && parked.isEmpty) }

    /// A request to send (`body`: its line after the opening brace, see `HeraldRequest.lineBody`):
    /// in flight at once when the window has room, else parked until it has.
    /// Returns whether it was admitted (false: parked; an `admit` action follows later).
    mutating func requestQueued(body: [UInt8], waiter: Waiter, admission: Admission, actions: inout [Action]) -> Bool {
        if let ended {
            actions.append(.settle(waiter, .failure(ended)))
            return true
        }
        guard hasRoom && parked.isEmpty else {
            parked.append((body, waiter, admission))
            return false
        }
        send(body: body, waiter: waiter, actions: &actions)
        return true
    }

    private mutating func send(body: [UInt8], waiter: Waiter, actions: inout [Action]) {
        let rid = nextRid
        nextRid += 1
        // `rid` first: the rest of the line was written before, outside the lock.
        var bytes: [UInt8] = []
        bytes.reserveCapacity(body.count + 24)
        bytes.append(contentsOf: #"{"rid":"#.utf8)
        bytes.append(contentsOf: String(rid).utf8)
        bytes.append(UInt8(ascii: ","))
        bytes.append(contentsOf: body)
        inFlight.append(InFlight(rid: rid, line: bytes, waiter: waiter))
        if connected {
            if outbox.isEmpty { actions.append(.wake) }
            outbox.append(contentsOf: bytes)
        }
    }

    /// A reply line (`ok` present). Replies come in request order; one without our `rid` is the
    /// server's own error about the connection (returned, for the connection to judge).
    mutating func replyReceived(_ line: [UInt8], _ reply: ReplyHead, actions: inout [Action]) -> HeraldError? {
        let ok = reply.ok
        guard head < inFlight.count, reply.rid == inFlight[head].rid else {
            return ok ? nil : HeraldError(line: line)
        }
        let done = inFlight[head]
        head += 1
        if head > 1024 && head * 2 > inFlight.count {
            inFlight.removeSubrange(..<head)
            head = 0
        }
        actions.append(.settle(done.waiter, ok ? .success(line) : .failure(HeraldError(line: line))))
        admitParked(actions: &actions)
        return nil
    }

    private mutating func admitParked(actions: inout [Action]) {
        guard count <= lowWater else { return }
        while hasRoom && !parked.isEmpty {
            let next = parked.removeFirst()
            send(body: next.body, waiter: next.waiter, actions: &actions)
            actions.append(.admit(next.admission))
        }
    }

    /// A granted hello on a new connection: every request not answered goes again, in order.
    mutating func connectionEstablished() -> [UInt8] {
        connected = true
        outbox = []
        var bytes: [UInt8] = []
        for i in head..<inFlight.count { bytes.append(contentsOf: inFlight[i].line) }
        return bytes
    }

    mutating func connectionLost() {
        connected = false
        outbox = []
    }

    mutating func takeOutbox() -> [UInt8] {
        defer { outbox = [] }
        return outbox
    }

    /// The session will not come back: every request in flight or parked fails with `error`.
    mutating func sessionEnded(_ error: HeraldError, actions: inout [Action]) {
        if ended == nil { ended = error }
        connected = false
        outbox = []
        for i in head..<inFlight.count { actions.append(.settle(inFlight[i].waiter, .failure(error))) }
        inFlight = []
        head = 0
        for p in parked {
            actions.append(.settle(p.waiter, .failure(error)))
            actions.append(.admit(p.admission))
        }
        parked = []
    }
}

extension RequestPipeline: Sendable where Waiter: Sendable, Admission: Sendable {}
extension RequestPipeline.InFlight: Sendable where Waiter: Sendable {}
extension RequestPipeline.Action: Sendable where Waiter: Sendable, Admission: Sendable {}
