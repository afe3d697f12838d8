// A thin layer over NATS's C client: one connection, its JetStream context, the stream check and async publishes.
import CNats
import Foundation

/// Why the bridge could not go on with NATS (the session ends and starts again).
public struct NatsFailure: Error, CustomStringConvertible {
    public let description: String
    init(_ what: String, _ status: natsStatus, _ jsError: jsErrCode = jsErrCode(rawValue: 0)) {
        let text = String(cString: natsStatus_GetText(status))
        description = jsError.rawValue != 0 ? "\(what): \(text) (JetStream error \(jsError.rawValue))" : "\(what): \(text)"
    }
    public init(_ description: String) { self.description = description }
}

/// What the publish callbacks report, from the NATS client's threads to the bridge's.
final class PublishInbox: @unchecked Sendable {
    // Why @unchecked Sendable: `confirmed` and `failure` are only touched while holding `condition`.
    enum Event { case confirmed(String), failed(String) }
    private let condition = NSCondition()
    private var confirmed: [String] = []
    private(set) var failure: String?

    func confirmed(_ id: String) {
        condition.lock(); confirmed.append(id); condition.signal(); condition.unlock()
    }

    func failed(_ why: String) {
        condition.lock()
        if failure == nil { failure = why }
        condition.signal()
        condition.unlock()
    }

    /// The confirmed message ids so far (emptied) and the first failure, if any; waits up to
    /// `milliseconds` for one when there is none.
    func take(waitingUpTo milliseconds: Int) -> (confirmed: [String], failure: String?) {
        condition.lock()
        defer { condition.unlock() }
        if confirmed.isEmpty && failure == nil && milliseconds > 0 {
            _ = condition.wait(until: Date().addingTimeInterval(Double(milliseconds) / 1000))
        }
        let taken = confirmed
        confirmed.removeAll(keepingCapacity: true)
        return (taken, failure)
    }
}

/// The publish acknowledgement handler: a confirmation (stored, or a duplicate the stream already
/// had) or a failure, by message id. The library hands the message over: destroyed here.
private let publishAcknowledged: jsPubAckHandler = { _, msg, ack, ackError, closure in
    guard let closure else { natsMsg_Destroy(msg); return }
    let inbox = Unmanaged<PublishInbox>.fromOpaque(closure).takeUnretainedValue()
    var value: UnsafePointer<CChar>?
    let id = natsMsgHeader_Get(msg, "Nats-Msg-Id", &value) == NATS_OK ? value.map { String(cString: $0) } : nil
    if ack != nil, let id {
        inbox.confirmed(id)
    } else if let ackError {
        let text = ackError.pointee.ErrText.map { String(cString: $0) } ?? String(cString: natsStatus_GetText(ackError.pointee.Err))
        inbox.failed("JetStream refused or did not confirm message \(id ?? "?"): \(text)")
    } else {
        inbox.failed("JetStream confirmed a message without its Nats-Msg-Id")
    }
    natsMsg_Destroy(msg)
}

private let connectionLost: natsConnectionHandler = { _, closure in
    guard let closure else { return }
    Unmanaged<PublishInbox>.fromOpaque(closure).takeUnretainedValue().failed("the connection to NATS was lost")
}

/// One connection to a NATS server with JetStream, reconnecting never by itself: a lost connection
/// fails the publishes in flight and ends the bridge's session, which starts a new one. (The
/// client's own reconnect would resend buffered publishes after others had failed, out of order.)
public final class NatsJetStream {
    private var connection: OpaquePointer?
    private var js: OpaquePointer?
    let inbox = PublishInbox()
    private let inboxPointer: UnsafeMutableRawPointer

    /// `maxPending`: the most publishes unconfirmed at once; `ackWaitMilliseconds`: how long one
    /// waits for its confirmation before it counts as failed.
    public init(url: String, maxPending: Int, ackWaitMilliseconds: Int64) throws(NatsFailure) {
        inboxPointer = Unmanaged.passRetained(inbox).toOpaque()
        var options: OpaquePointer?
        var s = natsOptions_Create(&options)
        guard s == NATS_OK, let options else { throw NatsFailure("creating NATS options", s) }
        defer { natsOptions_Destroy(options) }
        s = natsOptions_SetURL(options, url)
        if s == NATS_OK { s = natsOptions_SetAllowReconnect(options, false) }
        if s == NATS_OK { s = natsOptions_SetTimeout(options, 2_000) }
        if s == NATS_OK { s = natsOptions_SetName(options, "herald-bridge") }
        if s == NATS_OK { s = natsOptions_SetPingInterval(options, 2_000) }
        if s == NATS_OK { s = natsOptions_SetMaxPingsOut(options, 2) }
        if s == NATS_OK { s = natsOptions_SetDisconnectedCB(options, connectionLost, inboxPointer) }
        if s == NATS_OK { s = natsOptions_SetClosedCB(options, connectionLost, inboxPointer) }
        guard s == NATS_OK else { throw NatsFailure("setting NATS options for \(url)", s) }
        s = natsConnection_Connect(&connection, options)
        guard s == NATS_OK else { throw NatsFailure("connecting to NATS at \(url)", s) }
        var jsOptions = jsOptions()
        jsOptions_Init(&jsOptions)
        jsOptions.Wait = 5_000
        jsOptions.PublishAsync.MaxPending = Int64(maxPending)
        jsOptions.PublishAsync.AckHandler = publishAcknowledged
        jsOptions.PublishAsync.AckHandlerClosure = inboxPointer
        s = natsConnection_JetStream(&js, connection, &jsOptions)
        guard s == NATS_OK else { throw NatsFailure("opening JetStream on \(url)", s) }
        self.ackWait = ackWaitMilliseconds
    }

    private let ackWait: Int64

    deinit { close() }

    /// Closes the connection (publishes unconfirmed fail) and frees the context.
    public func close() {
        if let js { jsCtx_Destroy(js); self.js = nil }
        if let connection {
            natsConnection_Close(connection)
            natsConnection_Destroy(connection)
            self.connection = nil
            // The callbacks may still run while the library tears down: the inbox stays alive.
        }
    }

    /// What `ensureStream` found or made.
    public struct StreamState {
        public var created: Bool
        public var messages: UInt64
        public var firstSequence: UInt64
        public var lastSequence: UInt64
    }

    /// The stream `name` exists with file storage, a subject covering `subject`, and a duplicate
    /// window of at least `duplicateWindowSeconds` — created so when absent; refused (not changed)
    /// when it exists otherwise.
    public func ensureStream(_ name: String, subject: String, duplicateWindowSeconds: Int64) throws(NatsFailure) -> StreamState {
        var info: UnsafeMutablePointer<jsStreamInfo>?
        var jsError = jsErrCode(rawValue: 0)
        var s = js_GetStreamInfo(&info, js, name, nil, &jsError)
        if s == NATS_NOT_FOUND || jsError == JSStreamNotFoundErr {
            var config = jsStreamConfig()
            jsStreamConfig_Init(&config)
            s = name.withCString { namePointer in
                subject.withCString { subjectPointer in
                    var subjects: [UnsafePointer<CChar>?] = [subjectPointer]
                    return subjects.withUnsafeMutableBufferPointer { list in
                        config.Name = namePointer
                        config.Subjects = list.baseAddress
                        config.SubjectsLen = 1
                        config.Storage = js_FileStorage
                        config.Duplicates = duplicateWindowSeconds * 1_000_000_000
                        return js_AddStream(&info, js, &config, nil, &jsError)
                    }
                }
            }
            guard s == NATS_OK, let info else { throw NatsFailure("creating JetStream stream \(name)", s, jsError) }
            defer { jsStreamInfo_Destroy(info) }
            return StreamState(created: true, messages: 0, firstSequence: 0, lastSequence: 0)
        }
        guard s == NATS_OK, let info else { throw NatsFailure("reading JetStream stream \(name)", s, jsError) }
        defer { jsStreamInfo_Destroy(info) }
        guard let config = info.pointee.Config else { throw NatsFailure("JetStream stream \(name) came without its configuration") }
        let subjects = (0..<Int(config.pointee.SubjectsLen)).compactMap { config.pointee.Subjects[$0].map { String(cString: $0) } }
        guard config.pointee.Storage == js_FileStorage else {
            throw NatsFailure("JetStream stream \(name) keeps its messages in memory: a restart of nats-server would lose what Herald's cursor has passed. Use a stream with file storage (or let the bridge create one under a new name).")
        }
        guard subjects.contains(subject) || subjects.contains(">") else {
            throw NatsFailure("JetStream stream \(name) takes subjects \(subjects), not \(subject): the bridge's messages would not be stored. Add \(subject) to its subjects, or give --stream a new name.")
        }
        let window = config.pointee.Duplicates / 1_000_000_000
        guard window >= duplicateWindowSeconds else {
            throw NatsFailure("JetStream stream \(name) drops duplicates for \(window) s, less than the bridge's --duplicate-window \(duplicateWindowSeconds) s: a delivery re-published after a restart could be stored twice. Raise the stream's duplicate window (nats stream edit \(name) --dupe-window \(duplicateWindowSeconds)s) or lower --duplicate-window.")
        }
        return StreamState(created: false, messages: info.pointee.State.Msgs, firstSequence: info.pointee.State.FirstSeq,
                           lastSequence: info.pointee.State.LastSeq)
    }

    /// The stream's message count and sequences (it must exist).
    public func streamState(_ name: String) throws(NatsFailure) -> StreamState {
        var info: UnsafeMutablePointer<jsStreamInfo>?
        var jsError = jsErrCode(rawValue: 0)
        let s = js_GetStreamInfo(&info, js, name, nil, &jsError)
        guard s == NATS_OK, let info else { throw NatsFailure("reading JetStream stream \(name)", s, jsError) }
        defer { jsStreamInfo_Destroy(info) }
        return StreamState(created: false, messages: info.pointee.State.Msgs, firstSequence: info.pointee.State.FirstSeq,
                           lastSequence: info.pointee.State.LastSeq)
    }

    /// The stored message at `sequence`: its subject, `Nats-Msg-Id` and payload.
    public func message(_ stream: String, at sequence: UInt64) throws(NatsFailure) -> (subject: String, id: String?, payload: [UInt8]) {
        var msg: OpaquePointer?
        var jsError = jsErrCode(rawValue: 0)
        let s = js_GetMsg(&msg, js, stream, sequence, nil, &jsError)
        guard s == NATS_OK, let msg else { throw NatsFailure("reading message \(sequence) of stream \(stream)", s, jsError) }
        defer { natsMsg_Destroy(msg) }
        var value: UnsafePointer<CChar>?
        let id = natsMsgHeader_Get(msg, "Nats-Msg-Id", &value) == NATS_OK ? value.map { String(cString: $0) } : nil
        let length = Int(natsMsg_GetDataLength(msg))
        let payload = natsMsg_GetData(msg).map { Array(UnsafeRawBufferPointer(start: $0, count: length)) } ?? []
        return (natsMsg_GetSubject(msg).map { String(cString: $0) } ?? "", id, payload)
    }

    /// The message ids JetStream confirmed since the last call, and the first failure if any;
    /// waits up to `milliseconds` for one when there is none.
    public func confirmations(waitingUpTo milliseconds: Int) -> (confirmed: [String], failure: String?) {
        inbox.take(waitingUpTo: milliseconds)
    }

    /// Publishes `payload` on `subject` with `Nats-Msg-Id: id`; its confirmation (or failure) comes to `inbox`.
    public func publish(subject: String, payload: UnsafeRawBufferPointer, id: String) throws(NatsFailure) {
        var msg: OpaquePointer?
        var s = natsMsg_Create(&msg, subject, nil, payload.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(payload.count))
        guard s == NATS_OK, msg != nil else { throw NatsFailure("building the message for \(id)", s) }
        s = natsMsgHeader_Set(msg, "Nats-Msg-Id", id)
        if s == NATS_OK {
            var options = jsPubOptions()
            jsPubOptions_Init(&options)
            options.MaxWait = ackWait
            s = js_PublishMsgAsync(js, &msg, &options)
        }
        // On success the library owns the message (and set `msg` to nil).
        if msg != nil { natsMsg_Destroy(msg) }
        guard s == NATS_OK else { throw NatsFailure("publishing \(id) to JetStream", s) }
    }
}
