// A small HTTP server on the service's loop (libevent's evhttp): GET and HEAD of a few fixed paths.
import CLibEvent
import Glibc

/// libevent's HTTP server bound to host:port on `loop`. Each request's path goes to `handle`,
/// which answers with a status, a content type and a body, on the loop thread: an answer at all
/// shows the loop turns. Only GET and HEAD are allowed (others get 405 from libevent); requests
/// have 10 s to arrive whole and at most 8 KiB of headers and no body.
public final class HTTPEndpoint {
    public struct Response {
        public var status: Int32
        public var contentType: String
        public var body: [UInt8]
        public init(status: Int32, contentType: String = "text/plain; charset=utf-8", body: [UInt8]) {
            self.status = status; self.contentType = contentType; self.body = body
        }
        public init(status: Int32, text: String) { self.init(status: status, body: Array(text.utf8)) }

        /// Herald's answer to `path`: `/metrics` (the exposition `metrics` makes), `/healthz` (an
        /// answer at all shows the loop turns), `/readyz` (`notReady` says why not, or nil), `/`.
        static func herald(_ path: String, metrics: () -> [UInt8], notReady: () -> String?) -> Response {
            switch path {
            case "/metrics":
                return Response(status: 200, contentType: "text/plain; version=0.0.4; charset=utf-8", body: metrics())
            case "/healthz":
                return Response(status: 200, text: "ok: the loop turns\n")
            case "/readyz":
                if let why = notReady() { return Response(status: 503, text: "not ready: \(why)\n") }
                return Response(status: 200, text: "ready\n")
            case "/":
                return Response(status: 200, text: "herald: /metrics /healthz /readyz\n")
            default:
                return Response(status: 404, text: "not found: \(path) (try /metrics, /healthz or /readyz)\n")
            }
        }
    }

    private var http: OpaquePointer?
    /// Strong: the event_base must outlive the evhttp created on it.
    private let loop: EventLoop
    private let handle: (String) -> Response
    /// The port actually bound (port 0 asks for any).
    public private(set) var port = 0

    public init(loop: EventLoop, host: String, port: Int, handle: @escaping (String) -> Response) throws(ServiceError) {
        self.loop = loop
        self.handle = handle
        guard (0...65_535).contains(port) else { throw .configuration("--http port \(port) is not a TCP port (0–65535).") }
        guard let http = evhttp_new(loop.base) else { throw .configuration("libevent could not create its HTTP server (out of memory)") }
        self.http = http
        evhttp_set_allowed_methods(http, UInt16(EVHTTP_REQ_GET.rawValue | EVHTTP_REQ_HEAD.rawValue))
        evhttp_set_timeout(http, 10)
        evhttp_set_max_headers_size(http, 8 << 10)
        evhttp_set_max_body_size(http, 0)
        guard let bound = evhttp_bind_socket_with_handle(http, host == "localhost" ? "127.0.0.1" : host, UInt16(port)) else {
            let code = errno
            evhttp_free(http)
            self.http = nil
            throw .configuration("Could not serve HTTP on \(host):\(port) (--http): \(String(cString: strerror(code))). Is another process using the port?")
        }
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(evhttp_bound_socket_get_fd(bound), $0, &length) }
        }
        self.port = Int(UInt16(bigEndian: address.sin_port))
        // Unretained: this object owns the evhttp and frees it in deinit.
        evhttp_set_gencb(http, { request, context in
            guard let request, let context else { return }
            Unmanaged<HTTPEndpoint>.fromOpaque(context).takeUnretainedValue().answer(request)
        }, Unmanaged.passUnretained(self).toOpaque())
    }

    deinit {
        if let http { evhttp_free(http) }
    }

    private func answer(_ request: OpaquePointer) {
        var path = "/"
        if let uri = evhttp_request_get_evhttp_uri(request), let p = evhttp_uri_get_path(uri) {
            path = String(cString: p)
        }
        let response = handle(path.isEmpty ? "/" : path)
        let headers = evhttp_request_get_output_headers(request)
        evhttp_add_header(headers, "Content-Type", response.contentType)
        evhttp_add_header(headers, "Cache-Control", "no-store")
        let buffer = evbuffer_new()
        defer { evbuffer_free(buffer) }
        if !response.body.isEmpty {
            response.body.withUnsafeBytes { _ = evbuffer_add(buffer, $0.baseAddress, $0.count) }
        }
        evhttp_send_reply(request, response.status, Self.reason(response.status), buffer)
    }

    static func reason(_ status: Int32) -> String {
        switch status {
        case 200: "OK"
        case 404: "Not Found"
        case 503: "Service Unavailable"
        default: "Status"
        }
    }
}
