// Splits a TCP byte stream into newline-terminated request lines, with a hard limit per line.

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
        guard !overflowed else { return false }
        var start = 0
        let count = bytes.count
        while start < count {
            guard let nl = bytes[start..<count].firstIndex(of: 0x0A) else {
                partial.append(contentsOf: bytes[start..<count])
                if partial.count > maxLineBytes { overflowed = true; return false }
                return true
            }
            var piece = partial
            partial.removeAll(keepingCapacity: true)
            piece.append(contentsOf: bytes[start..<nl])
            if piece.count > maxLineBytes + 1 || (piece.count == maxLineBytes + 1 && piece.last != 0x0D) {
                overflowed = true
                return false
            }
            if piece.last == 0x0D { piece.removeLast() }
            line(piece)
            start = nl + 1
        }
        return true
    }

    public mutating func feed(_ bytes: [UInt8], line: ([UInt8]) -> Void) -> Bool {
        bytes.withUnsafeBytes { feed($0, line: line) }
    }
}
