// A refusal from the server, or the client's own failure, as one typed error with the server's code, title and detail.

/// Every failure the client reports. `code` is the server's stable snake_case code
/// (docs/errors.md, "Every error code") or one of the client's own:
/// `client_closed`, `unreachable`, `connect_failed`, `tls_failed`, `malformed_reply`, `timeout`,
/// `concurrent_next` (two tasks reading one consumer), `invalid_address`, `invalid_delivery` (a
/// delivery line that does not decode).
public struct HeraldError: Error, Sendable, Hashable, CustomStringConvertible {
    public var code: String
    /// What happened, specifically.
    public var title: String
    /// Why, and what to change.
    public var detail: String

    public init(code: String, title: String, detail: String = "") {
        self.code = code; self.title = title; self.detail = detail
    }

    /// The group a code belongs to, to decide what to do about it.
    public enum Kind: Sendable, Hashable {
        /// The hello was refused (`invalid_token`, …): fatal for the client.
        case authentication
        /// The token does not allow this op, app or consumer name.
        case forbidden
        /// The request names something the server does not know.
        case notFound
        /// Nothing was committed; the same request may be sent again (`store_unavailable`).
        case retryable
        /// The server closed the connection for a reason of its own (`grant_revoked`, `busy`, …).
        case connection
        /// The client was closed, or gave up reconnecting, before the reply.
        case client
        /// The request itself is wrong: a missing, mistyped or out-of-range field.
        case validation
    }

    public var kind: Kind {
        switch code {
        case "invalid_token", "too_many_refused_hellos", "hello_required", "hello_timeout": return .authentication
        case "forbidden", "forbidden_app", "forbidden_consumer": return .forbidden
        case "unknown_notification", "unknown_consumer": return .notFound
        case "store_unavailable": return .retryable
        case "grant_revoked", "busy", "evicted_before_hello", "partition_reassigned", "line_too_long", "not_owner": return .connection
        case "client_closed", "unreachable", "connect_failed", "tls_failed", "malformed_reply", "timeout", "concurrent_next", "invalid_address", "invalid_delivery": return .client
        default: return .validation
        }
    }

    /// Errors after which the client does not reconnect: the same hello would be refused again.
    var isFinal: Bool {
        kind == .authentication || code == "grant_revoked"
    }

    public var description: String { detail.isEmpty ? "\(code): \(title)" : "\(code): \(title) — \(detail)" }

    /// The typed error of an `{"ok":false,"error":{…}}` line.
    init(reply: [String: HeraldJSON]) {
        guard let error = reply["error"]?.objectValue else {
            self.init(code: "malformed_reply", title: "The server sent an error without details", detail: HeraldJSON.object(reply).jsonString)
            return
        }
        self.init(code: error["code"]?.stringValue ?? "unknown_error",
                  title: error["title"]?.stringValue ?? error["message"]?.stringValue ?? "",
                  detail: error["detail"]?.stringValue ?? "")
    }

    /// The typed error of an error reply's line.
    init(line: [UInt8]) {
        guard case .object(let reply)? = try? HeraldJSON.parse(line) else {
            self.init(code: "malformed_reply", title: "The server sent a line that is not JSON", detail: String(decoding: line.prefix(200), as: UTF8.self))
            return
        }
        self.init(reply: reply)
    }

    static let closed = HeraldError(code: "client_closed", title: "The client is closed",
                                    detail: "The client was closed before this request was answered.")
}
