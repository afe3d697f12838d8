// A request's reply, to await later: what lets a producer pipeline thousands of requests from one task.
import Synchronization

/// Where the session's thread puts a reply and awaiting tasks pick it up.
final class ReplySlot: Sendable {
    private enum State {
        case waiting([UnsafeContinuation<Result<[UInt8], HeraldError>, Never>])
        case done(Result<[UInt8], HeraldError>)
    }
    private let state = Mutex<State>(.waiting([]))
    /// Given a failure first: true when it sends the request again elsewhere (a routed request
    /// refused with `not_owner`, or whose owner could not be reached); the slot then stays open.
    private let redirect: (@Sendable (ReplySlot, HeraldError) -> Bool)?

    init(redirect: (@Sendable (ReplySlot, HeraldError) -> Bool)? = nil) {
        self.redirect = redirect
    }

    func settle(_ result: Result<[UInt8], HeraldError>) {
        if let redirect, case .failure(let error) = result, redirect(self, error) { return }
        let waiters: [UnsafeContinuation<Result<[UInt8], HeraldError>, Never>] = state.withLock { state in
            guard case .waiting(let waiters) = state else { return [] }
            state = .done(result)
            return waiters
        }
        for w in waiters { w.resume(returning: result) }
    }

    /// The reply's line, or the error.
    var result: Result<[UInt8], HeraldError> {
        get async {
            if case .done(let r) = state.withLock({ $0 }) { return r }
            return await withUnsafeContinuation { continuation in
                let done: Result<[UInt8], HeraldError>? = state.withLock { state in
                    switch state {
                    case .done(let r): return r
                    case .waiting(var waiters):
                        waiters.append(continuation)
                        state = .waiting(waiters)
                        return nil
                    }
                }
                if let done { continuation.resume(returning: done) }
            }
        }
    }

    var isSettled: Bool { state.withLock { if case .done = $0 { return true }; return false } }
}

/// The ack of a request sent with `HeraldProducer.send`: await `value` for it (it throws the
/// request's `HeraldError` when refused). Acks arrive in the order the requests were sent.
public struct PendingAck: Sendable {
    let slot: ReplySlot

    public var value: Ack {
        get async throws(HeraldError) {
            switch await slot.result {
            case .success(let line): return Ack(line: line)
            case .failure(let error): throw error
            }
        }
    }

    /// Whether the reply has come (an ack or an error).
    public var isSettled: Bool { slot.isSettled }
}
