// Dispatched requests counted on the loop in plain integers: replies by op, errors by op and code, durations from dispatch to reply.
import Glibc
import HeraldCore

/// What the service's replies count (`Reply` reports each one here). Plain integers on the loop
/// thread: `/metrics` reads them when scraped (`ServiceObservability`). Durations are timed only
/// while `durations` is set (`--http`), so a service without metrics reads no clock for them.
final class RequestMetrics {
    /// Replies sent, by op (index: `Op.rawValue`), errors included.
    private(set) var replies = [Int](repeating: 0, count: Op.allCases.count)
    /// Error replies by op and code.
    private(set) var errors: [ErrorKey: Int] = [:]
    /// Takes each reply's op and its nanoseconds since dispatch.
    var durations: ((Op, Int64) -> Void)?

    struct ErrorKey: Hashable {
        var op: Op
        var code: String
    }

    /// A dispatch's start: the monotonic clock while durations are kept, else 0 (no clock read).
    @inline(__always) func start() -> Int64 { durations == nil ? 0 : Self.nanoseconds() }

    static func nanoseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }

    /// A success reply (an ack written in place).
    @inline(__always) func succeeded(_ op: Op, startedAt: Int64) {
        replies[Int(op.rawValue)] &+= 1
        if let durations, startedAt != 0 { durations(op, Self.nanoseconds() - startedAt) }
    }

    /// A reply as bytes: an error reply's code is read from its first bytes. Every error line is
    /// canonical JSON (`WireReply.error`), keys sorted, so it starts `{"error":{"code":"`.
    func replied(_ op: Op, startedAt: Int64, _ bytes: [UInt8]) {
        succeeded(op, startedAt: startedAt)
        guard let code = Self.errorCode(bytes) else { return }
        errors[ErrorKey(op: op, code: code), default: 0] += 1
    }

    static let errorPrefix = Array(#"{"error":{"code":""#.utf8)

    /// The code of an error line, nil for any other line.
    static func errorCode(_ bytes: [UInt8]) -> String? {
        guard bytes.count > errorPrefix.count, bytes.starts(with: errorPrefix) else { return nil }
        let rest = bytes[errorPrefix.count...]
        guard let end = rest.firstIndex(of: UInt8(ascii: "\"")) else { return nil }
        return String(decoding: rest[..<end], as: UTF8.self)
    }
}
