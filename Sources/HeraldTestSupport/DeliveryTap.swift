// A consumer for benchmarks: subscribes, then hands each delivery line to a closure without parsing or per-line copies.
import Foundation
import Glibc

/// A subscribed consumer that can keep up with a storm of a million delivery lines: reads big
/// chunks and scans them for newlines in place (`WireClient.readLine` removes each line from the
/// front of its buffer, which is quadratic at this volume, and parses JSON per line).
public final class DeliveryTap {
    private let fd: Int32
    private var buffer = [UInt8](repeating: 0, count: 1 << 20)
    private var filled = 0

    /// Connects, says hello and subscribes `consumer` from the committed tail; returns after the
    /// subscribe reply (deliveries committed after it will be streamed).
    /// `from`: a cursor to start after (nil: the committed tail).
    public init(port: Int, consumer: String, from: Int64? = nil) throws {
        let client = try WireClient(port: port)
        _ = try client.request(#"{"op":"hello"}"#)
        let start = from.map { #","from":\#($0)"# } ?? ""
        let reply = try client.request(#"{"op":"subscribe","consumer":"\#(consumer)"\#(start)}"#)
        guard reply["ok"] == true else { throw WireClient.Failure.io("subscribe refused: \(reply.canonicalString)") }
        // Take over the socket: nothing else was sent after the reply, so nothing is buffered.
        fd = dup(client.fileDescriptor)
        client.close()
    }

    /// Reads lines from a socket already set up (it is closed with the tap): for tests of the scan.
    init(fileDescriptor: Int32) { fd = fileDescriptor }

    deinit { Glibc.close(fd) }

    /// Reads lines until `line` returns false; a line is the bytes before its newline.
    /// Throws when nothing arrives for `idleTimeoutMilliseconds`.
    public func read(idleTimeoutMilliseconds: Int32 = 120_000, _ line: (UnsafeRawBufferPointer) -> Bool) throws {
        var start = 0
        while true {
            if filled == buffer.count {
                if start == 0 { buffer += [UInt8](repeating: 0, count: buffer.count) }  // a line longer than the buffer
                else {
                    buffer.withUnsafeMutableBytes { b in
                        _ = memmove(b.baseAddress!, b.baseAddress! + start, filled - start)
                    }
                    filled -= start
                    start = 0
                }
            }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&p, 1, idleTimeoutMilliseconds)
            if ready == 0 { throw WireClient.Failure.timeout }
            if ready < 0 { if errno == EINTR { continue }; throw WireClient.Failure.io("poll failed") }
            let n = buffer.withUnsafeMutableBytes { b in Glibc.read(fd, b.baseAddress! + filled, b.count - filled) }
            if n == 0 { throw WireClient.Failure.closed }
            if n < 0 { throw WireClient.Failure.io("read failed: \(String(cString: strerror(errno)))") }
            let scanFrom = filled
            filled += n
            // memchr, not a Swift loop over each byte: at a burst's 20,000 lines (10 MB) a byte
            // loop takes half of this consumer's CPU, on the cores the service under test shares.
            let keepGoing: Bool = buffer.withUnsafeBytes { b in
                let base = b.baseAddress!
                var i = scanFrom
                while i < filled, let hit = memchr(base + i, 0x0A, filled - i) {
                    let end = base.distance(to: UnsafeRawPointer(hit))
                    if !line(UnsafeRawBufferPointer(rebasing: b[start..<end])) { return false }
                    start = end + 1
                    i = end + 1
                }
                return true
            }
            if !keepGoing { return }
            if start == filled { start = 0; filled = 0 }
        }
    }
}

extension UnsafeRawBufferPointer {
    /// Whether `needle` occurs in these bytes (glibc's `memmem`: the storm's consumer shares the
    /// machine with the service, so its per-line scan should cost little).
    public func contains(_ needle: StaticString) -> Bool { offset(of: needle) != nil }

    /// Where `needle` starts in these bytes (glibc's `memmem`), or nil.
    private func offset(of needle: StaticString) -> Int? {
        let n = needle.utf8CodeUnitCount
        guard n > 0, n <= count, let base = baseAddress, let hit = glibcMemmem(base, count, needle.utf8Start, n) else { return nil }
        return base.distance(to: UnsafeRawPointer(hit))
    }

    /// The decimal number right after `key` (e.g. `"notification":"lat-`), or nil.
    public func intAfter(_ key: StaticString) -> Int? {
        guard let at = offset(of: key) else { return nil }
        var j = at + key.utf8CodeUnitCount, value = 0, digits = 0
        while j < count, self[j] >= 0x30, self[j] <= 0x39 { value = value * 10 + Int(self[j] - 0x30); j += 1; digits += 1 }
        return digits > 0 ? value : nil
    }

    /// The string value after `"key":"` (no escapes expected: ids the benchmark chose).
    public func stringField(_ key: StaticString) -> String? {
        guard let at = offset(of: key) else { return nil }
        let from = at + key.utf8CodeUnitCount
        var j = from
        while j < count && self[j] != 0x22 { j += 1 }
        return String(decoding: UnsafeRawBufferPointer(rebasing: self[from..<j]), as: UTF8.self)
    }
}

/// glibc's `memmem` (declared under `_GNU_SOURCE`, which Swift's Glibc module does not import).
@_silgen_name("memmem")
private func glibcMemmem(_ haystack: UnsafeRawPointer, _ haystackLength: Int, _ needle: UnsafeRawPointer,
                         _ needleLength: Int) -> UnsafeMutableRawPointer?
