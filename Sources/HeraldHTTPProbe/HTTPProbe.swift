// One blocking HTTP/1.0 GET (`herald health --http`, tests of /metrics): no curl needed in the image.
import Foundation
import Glibc

public enum HTTPProbe {
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// GETs `path` from host:port; returns the status code and the body (the first 64 KiB).
    /// The caller bounds the time (`Health`'s watchdog).
    public static func get(host: String, port: Int, path: String) throws(Failure) -> (status: Int, body: String) {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        guard inet_pton(AF_INET, host == "localhost" ? "127.0.0.1" : host, &address.sin_addr) == 1 else {
            throw Failure(description: "\(host) is not an IPv4 address")
        }
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "no socket: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let connected = withUnsafePointer(to: &address) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw Failure(description: "\(host):\(port) refused the connection (\(String(cString: strerror(errno))))") }
        let request = Array("GET \(path) HTTP/1.0\r\nHost: \(host):\(port)\r\nUser-Agent: herald-health\r\n\r\n".utf8)
        var sent = 0
        while sent < request.count {
            let n = request[sent...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { throw Failure(description: "\(host):\(port): could not send the request") }
            sent += n
        }
        var response: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while response.count < 65_536 {
            let n = read(fd, &chunk, chunk.count)
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            response += chunk[0..<n]
        }
        let text = String(decoding: response, as: UTF8.self)
        // "HTTP/1.1 200 OK\r\n…\r\n\r\nbody"
        let statusLine = text.prefix(while: { $0 != "\r" && $0 != "\n" })
        let parts = statusLine.split(separator: " ")
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/"), let status = Int(parts[1]) else {
            throw Failure(description: "\(host):\(port) did not answer HTTP (\(String(statusLine.prefix(80))))")
        }
        let body = text.range(of: "\r\n\r\n").map { String(text[$0.upperBound...]) } ?? ""
        return (status, body)
    }
}
