// Builds the reply lines of the wire protocol (SPEC §5) as canonical JSON.

/// Reply lines: `{"rid":…,"ok":true,…}` and `{"rid":…,"ok":false,"error":{code,title,detail}}`.
public enum WireReply {
    /// A success reply; `fields` are merged in (e.g. seq, warnings, duplicate).
    public static func ok(rid: JSONValue?, _ fields: [String: JSONValue] = [:]) -> [UInt8] {
        var object = fields
        object["ok"] = .bool(true)
        if let rid { object["rid"] = rid }
        return line(.object(object))
    }

    /// The common ack, `{"ok":true,"partition":p,"rid":…,"seq":n,"warnings":[…]}` (rid omitted
    /// when nil): byte-identical to `ok(rid:, ["partition": …, "seq": …, "warnings": …])`, written from a template
    /// instead of a dictionary encoded per reply (keys are already in canonical order).
    public static func appended(rid: JSONValue?, partition: Int = 0, seq: Int64, warnings: [RequestWarning]) -> [UInt8] {
        var out = ByteSink(capacity: 64)
        defer { out.deallocate() }
        return appended(rid: rid, partition: partition, seq: seq, warnings: warnings, using: &out)
    }

    /// `appended(rid:seq:warnings:)` written through the caller's reusable sink (cleared first),
    /// then copied into the reply's array (the service's path when the reply must wait its turn;
    /// otherwise it hands `writeAppended`'s bytes over in place).
    public static func appended(rid: JSONValue?, partition: Int = 0, seq: Int64, warnings: [RequestWarning], using out: inout ByteSink) -> [UInt8] {
        writeAppended(rid: rid, partition: partition, seq: seq, warnings: warnings, to: &out)
        return out.array
    }

    /// `appended(rid:seq:warnings:)`'s bytes, written into `out` (cleared first) and left there:
    /// the runtime hands them to the connection in place when nothing is queued before them.
    public static func writeAppended(rid: JSONValue?, partition: Int = 0, seq: Int64, warnings: [RequestWarning], to out: inout ByteSink) {
        out.removeAll()
        out.append("{\"ok\":true,\"partition\":")
        writeInt(Int64(partition), to: &out)
        out.append(UInt8(ascii: ","))
        if let rid {
            out.append("\"rid\":")
            rid.write(to: &out)
            out.append(UInt8(ascii: ","))
        }
        out.append("\"seq\":")
        writeInt(seq, to: &out)
        out.append(",\"warnings\":")
        if warnings.isEmpty { out.append("[]") } else { JSONValue.array(warnings.map(\.json)).write(to: &out) }
        out.append("}\n")
    }

    /// A failure reply written like a good alert.
    public static func error(rid: JSONValue?, _ error: RequestError) -> [UInt8] {
        var object: [String: JSONValue] = ["ok": .bool(false), "error": error.json]
        if let rid { object["rid"] = rid }
        return line(.object(object))
    }

    /// One line: canonical JSON and a newline.
    public static func line(_ value: JSONValue) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(128)
        value.write(to: &out)
        out.append(0x0A)
        return out
    }
}

extension RequestError {
    /// Errors of the wire layer itself (framing, JSON, roles), shared by the runtime and tests.
    public static func malformedLine(_ parse: JSONParseError) -> RequestError {
        RequestError(code: "malformed_json", title: "The line is not valid JSON: \(parse.message)",
                     detail: "Send one JSON object per line, UTF-8 encoded, terminated by \\n.")
    }

    public static func lineTooLong(limit: Int) -> RequestError {
        RequestError(code: "line_too_long", title: "A request line exceeded \(limit / 1024) KiB",
                     detail: "Lines are limited to \(limit) bytes. The connection is closed because the rest of the line cannot be parsed; shorten the request and reconnect: a notification may be at most 4 KiB, and a fan-out whose “users” list does not fit in one line must be split into several submits, each with an id of its own (an id is used once).")
    }

    public static let notAnObject = RequestError(
        code: "not_an_object", title: "The request is not a JSON object",
        detail: "Each line must be one JSON object with an \"op\" field, e.g. {\"op\":\"ping\"}.")

    public static let missingOp = RequestError(
        code: "missing_op", title: "The request has no \"op\" string",
        detail: "Every request names its operation, e.g. {\"op\":\"submit\", …}. See the protocol table in the README.")

    public static func unknownOp(_ op: String) -> RequestError {
        RequestError(code: "unknown_op", title: "Unknown op “\(clipped(op))”",
                     detail: "Known ops: \(Op.knownNames.joined(separator: ", ")).")
    }

    public static let helloRequired = RequestError(
        code: "hello_required", title: "Say hello first",
        detail: "Until a valid {\"op\":\"hello\",\"token\":\"…\"} only hello and ping are answered. Send hello with your token.")

    public static let invalidToken = RequestError(
        code: "invalid_token", title: "The token was not recognised",
        detail: "Check the token your operator issued; tokens are case-sensitive. The connection stays open for another hello.")

    /// A hello without a token on a service that has tokens (same code as a wrong one: a client
    /// handles both alike; the title says which happened).
    public static let tokenMissing = RequestError(
        code: "invalid_token", title: "The hello carried no token",
        detail: "This service requires a token: send {\"op\":\"hello\",\"token\":\"…\"} with the token your operator issued. The connection stays open for another hello.")

    /// A hello whose token is not a string (same code as a wrong one).
    public static func tokenNotAString(_ typeName: String) -> RequestError {
        RequestError(code: "invalid_token", title: "The hello's token is \(article(typeName)) \(typeName), not a string",
                     detail: "Send the token your operator issued as a JSON string: {\"op\":\"hello\",\"token\":\"…\"}. The connection stays open for another hello.")
    }

    /// The last line of a connection closed after `ClientSession.maxRefusedHellos` refused hellos.
    public static let tooManyRefusedHellos = RequestError(
        code: "too_many_refused_hellos", title: "Too many refused hellos on this connection",
        detail: "This connection sent \(ClientSession.maxRefusedHellos) hellos that were refused, and is closed: guessing tokens is not possible here. Check the token your operator issued, then reconnect.")

    public static let grantRevoked = RequestError(
        code: "grant_revoked", title: "This connection's access was changed by the operator",
        detail: "The tokens file was reloaded and no longer grants this connection what its hello did. Reconnect and hello again with a current token or certificate.")

    public static func forbidden(op: String, role: String) -> RequestError {
        RequestError(code: "forbidden", title: "This connection may not send “\(op)” requests",
                     detail: "\(op) needs the \(role) role, which your token does not grant. Ask the operator for a token with it.")
    }

    public static func appNotOwned(_ app: String) -> RequestError {
        RequestError(code: "forbidden_app", title: "This token may not act for app “\(clipped(app))”",
                     detail: "A producer token lists the apps it may submit and withdraw for. Use the token issued for \(clipped(app)).")
    }

    public static func consumerNotOwned(_ name: String) -> RequestError {
        RequestError(code: "forbidden_consumer", title: "This token may not consume as “\(clipped(name))”",
                     detail: "A consumer token lists the durable consumer names it may subscribe and ack as, so one consumer cannot move another's cursor or take its stream. Use the name issued with your token.")
    }

    /// `reason`: one line saying what PostgreSQL did (`StoreError.clientReason`).
    public static func storeUnavailable(_ reason: String) -> RequestError {
        RequestError(code: "store_unavailable", title: "The request was not carried out: PostgreSQL is unavailable",
                     detail: "\(reason). Nothing was stored. Herald reconnects by itself: send the same request again in a moment (a submit re-sent with the same id is stored once).")
    }

    /// The last line of a connection that had not said hello when the service, at its connection
    /// limit, gave its slot to a new client.
    public static let evictedBeforeHello = RequestError(
        code: "evicted_before_hello", title: "Closed for a new client: no hello yet",
        detail: "The service is at its connection limit and this connection had not said hello, so its slot went to a new client. Reconnect and send {\"op\":\"hello\",\"token\":\"…\"} first.")

    public static let busy = RequestError(
        code: "busy", title: "Herald is at its connection limit",
        detail: "The server refuses connections past its maximum. Retry with backoff, or pool connections.")
}
