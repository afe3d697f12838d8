// Where a request's answer goes: a value, not a closure.
import HeraldCore

/// A dispatched request's way back: its connection and its place in the connection's reply
/// order (`ticket`). Called like a closure (`reply(bytes)`), but a closure context would be an
/// allocation per request. A success reply to a submit is written from the service's reusable
/// sink straight to the connection (`appended`), without an array of its own, whenever no
/// earlier reply of the connection is outstanding.
struct Reply {
    let connection: ClientConnection
    let ticket: UInt64
    /// The request's op and dispatch time, for the metrics each reply updates.
    let op: Op
    let startedAt: Int64
    unowned(unsafe) let metrics: RequestMetrics
    /// The negative control's replies go nowhere (`acknowledgeBeforeCommitForTesting`).
    var dropped = false

    func callAsFunction(_ bytes: [UInt8]) {
        guard !dropped else { return }
        metrics.replied(op, startedAt: startedAt, bytes)
        connection.complete(ticket: ticket, reply: bytes)
    }

    /// The success reply of an appended event (`WireReply.appended`), written into `scratch`
    /// and handed over in place. The write's access to the sink ends before the connection is
    /// called: sending may resume reading, and so reach code that writes the sink again (after
    /// libevent has copied these bytes).
    func appended(rid: JSONValue?, partition: Int, seq: Int64, warnings: [RequestWarning], in scratch: ScratchSink) {
        guard !dropped else { return }
        metrics.succeeded(op, startedAt: startedAt)
        WireReply.writeAppended(rid: rid, partition: partition, seq: seq, warnings: warnings, to: &scratch.sink)
        connection.complete(ticket: ticket, replyIn: scratch.sink.bytes)
    }
}
