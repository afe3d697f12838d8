// A tiny poll(2) loop that drives a non-blocking connection for tools and tests (not the service loop).
import Glibc

/// Waits until a socket is readable and/or writable, or the timeout passes.
public enum PGPoll {
    /// Returns false on timeout. `timeoutMilliseconds` < 0 waits forever.
    @discardableResult
    public static func wait(socket: Int32, read: Bool, write: Bool, timeoutMilliseconds: Int32) -> Bool {
        var events: Int16 = 0
        if read { events |= Int16(POLLIN) }
        if write { events |= Int16(POLLOUT) }
        var fd = pollfd(fd: socket, events: events, revents: 0)
        while true {
            let n = poll(&fd, 1, timeoutMilliseconds)
            if n < 0 && errno == EINTR { continue }
            return n > 0
        }
    }
}
