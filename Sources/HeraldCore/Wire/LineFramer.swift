// Splits a TCP byte stream into newline-terminated request lines, with a hard limit per line.
#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif

/// Newline-delimited framing (SPEC §5): one request per `\n`-terminated line, at most
/// `maxLineBytes` bytes before the newline (a trailing `\r` is dropped). A line over the limit
/// is an error the connection does not recover from: the caller replies and closes, because
/// the rest of that line cannot be told apart from the next request.
public struct LineFramer: Sendable {
    public static let defaultMaxLineBytes = 64 * 1024

    public let maxLineBytes: Int
    private var partial: [UInt8] = []
    public private(set) var overflowed = false

    public init(maxLineBytes: Int = LineFramer.defaultMaxLineBytes) {
        self.maxLineBytes = maxLineBytes
    }

    /// Bytes held for an incomplete line.
    public var bufferedBytes: Int { partial.count }

    /// Feeds received bytes; calls `line` for each complete line (without the newline).
    /// Returns false — and stops — once a line exceeds the limit.
    public mutating func feed(_ bytes: UnsafeRawBufferPointer, line: ([UInt8]) -> Void) -> Bool {
        feedLines(bytes) { line(Array($0)) }
    }

    /// `feed`, handing each line over as bytes valid only during the call: a line that arrived
    /// whole in `bytes` is not copied at all (the service's path: it saves a copy and an
    /// allocation per request).
    public mutating func feedLines(_ bytes: UnsafeRawBufferPointer, line: (UnsafeRawBufferPointer) -> Void) -> Bool {
        guard !overflowed else { return false }
        guard let base = bytes.baseAddress else { return true }
        var start = 0
        let count = bytes.count
        while start < count {
            guard let found = memchr(base + start, 0x0A, count - start) else {
                partial.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[start..<count]).assumingMemoryBound(to: UInt8.self))
                if partial.count > maxLineBytes { overflowed = true; return false }
                return true
            }
            let nl = UnsafeRawPointer(found) - base
            let length = partial.count + nl - start
            let lastByte = nl > start ? bytes[nl - 1] : partial.last
            if length > maxLineBytes + 1 || (length == maxLineBytes + 1 && lastByte != 0x0D) {
                overflowed = true
                return false
            }
            let dropCR = lastByte == 0x0D ? 1 : 0
            if partial.isEmpty {
                line(UnsafeRawBufferPointer(rebasing: bytes[start..<(nl - dropCR)]))
            } else {
                partial.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[start..<nl]).assumingMemoryBound(to: UInt8.self))
                partial.withUnsafeBytes { line(UnsafeRawBufferPointer(rebasing: $0[..<($0.count - dropCR)])) }
                partial.removeAll(keepingCapacity: true)
            }
            start = nl + 1
        }
        return true
    }

    public mutating func feed(_ bytes: [UInt8], line: ([UInt8]) -> Void) -> Bool {
        bytes.withUnsafeBytes { feed($0, line: line) }
    }
}
