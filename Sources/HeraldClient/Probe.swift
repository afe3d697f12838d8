// A ping without hello on a connection of its own: a health check that needs no token.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension HeraldProducer {
    /// Sends `{"op":"ping"}` (the one op that needs no hello) on a connection of its own and
    /// returns the first line the server answers, without its newline: a healthy server's is
    /// `{"ok":true,"op":"pong",…}`, and whatever else answered is returned as it came, for the
    /// caller to judge. Blocks the calling thread up to `timeoutMilliseconds` for the connection
    /// and the reply together. Throws `connect_failed` or `tls_failed` (no connection), `timeout`
    /// (no line in time) or `client_closed` (the server closed the connection without a line).
    public static func probe(host: String = "127.0.0.1", port: Int = 7411, tls: TLSOptions? = nil,
                             timeoutMilliseconds: Int = 3_000) throws(HeraldError) -> String {
        let deadline = monotonicMilliseconds() + UInt64(max(1, timeoutMilliseconds))
        let socket = try LineSocket.open(host: host, port: port, tls: tls, timeoutSeconds: max(1, (timeoutMilliseconds + 999) / 1000))
        defer { socket.close() }
        let address = "\(host):\(port)"
        func closed() -> HeraldError {
            HeraldError(code: "client_closed", title: "\(address) closed the connection", detail: "It answered the ping with nothing.")
        }
        func wait(write: Bool) throws(HeraldError) {
            if socket.hasBufferedInput && !write { return }
            let now = monotonicMilliseconds()
            guard now < deadline else {
                throw HeraldError(code: "timeout", title: "\(address) did not answer a ping within \(timeoutMilliseconds) ms")
            }
            var p = pollfd(fd: socket.fd, events: Int16(write ? POLLOUT : POLLIN), revents: 0)
            _ = poll(&p, 1, Int32(min(deadline - now, 1_000)))
        }
        let request = Array(#"{"op":"ping"}"#.utf8) + [0x0A]
        var offset = 0
        while offset < request.count {
            switch request.withUnsafeBytes({ socket.write(UnsafeRawBufferPointer(rebasing: $0[offset...])) }) {
            case .bytes(let n): offset += n
            case .wouldBlock(let wantsWrite): try wait(write: wantsWrite)
            case .closed: throw closed()
            case .failed(let m): throw HeraldError(code: "connect_failed", title: "Writing a ping to \(address) failed", detail: m)
            }
        }
        var buffer: [UInt8] = []
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: 4_096, alignment: 1)
        defer { chunk.deallocate() }
        while true {
            if let nl = buffer.firstIndex(of: 0x0A) { return String(decoding: buffer[..<nl], as: UTF8.self) }
            // Not Herald: whatever streams without a newline is answer enough.
            if buffer.count >= 65_536 { return String(decoding: buffer, as: UTF8.self) }
            switch socket.read(into: chunk) {
            case .bytes(let n): buffer.append(contentsOf: UnsafeRawBufferPointer(rebasing: chunk[..<n]))
            case .wouldBlock(let wantsWrite): try wait(write: wantsWrite)
            case .closed: throw closed()
            case .failed(let m): throw HeraldError(code: "connect_failed", title: "Reading the reply to a ping from \(address) failed", detail: m)
            }
        }
    }
}
