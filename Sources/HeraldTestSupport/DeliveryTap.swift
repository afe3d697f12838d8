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
            let keepGoing: Bool = buffer.withUnsafeBytes { b in
                var i = scanFrom
                while i < filled {
                    if b[i] == 0x0A {
                        if !line(UnsafeRawBufferPointer(rebasing: b[start..<i])) { return false }
                        start = i + 1
                    }
                    i += 1
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
    public func contains(_ needle: StaticString) -> Bool {
        let n = needle.utf8CodeUnitCount
        guard n > 0, n <= count, let base = baseAddress else { return false }
        return glibcMemmem(base, count, needle.utf8Start, n) != nil
    }

    /// The decimal number right after `key` (e.g. `"notification":"lat-`), or nil.
    public func intAfter(_ key: StaticString) -> Int? {
        let n = key.utf8CodeUnitCount
        var i = 0
        while i + n <= count {
            if self[i] == key.utf8Start.pointee && memcmp(baseAddress! + i, key.utf8Start, n) == 0 {
                var j = i + n, value = 0, digits = 0
                while j < count, self[j] >= 0x30, self[j] <= 0x39 { value = value * 10 + Int(self[j] - 0x30); j += 1; digits += 1 }
                return digits > 0 ? value : nil
            }
            i += 1
        }
        return nil
    }

    /// The string value after `"key":"` (no escapes expected: ids the benchmark chose).
    public func stringField(_ key: StaticString) -> String? {
        let n = key.utf8CodeUnitCount
        var i = 0
        while i + n <= count {
            if memcmp(baseAddress! + i, key.utf8Start, n) == 0 {
                var j = i + n
                while j < count && self[j] != 0x22 { j += 1 }
                return String(decoding: UnsafeRawBufferPointer(rebasing: self[(i + n)..<j]), as: UTF8.self)
            }
            i += 1
        }
        return nil
    }
}

/// glibc's `memmem` (declared under `_GNU_SOURCE`, which Swift's Glibc module does not import).
@_silgen_name("memmem")
private func glibcMemmem(_ haystack: UnsafeRawPointer, _ haystackLength: Int, _ needle: UnsafeRawPointer,
                         _ needleLength: Int) -> UnsafeMutableRawPointer?
