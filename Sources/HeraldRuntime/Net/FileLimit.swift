// How many connections the process's file-descriptor limit allows.
import Glibc

/// The process's open-file limit (RLIMIT_NOFILE), which bounds the connections it can hold.
public enum FileLimit {
    /// Descriptors kept for what is not a client: PostgreSQL connections (writers, readers,
    /// catch-up pages, reconnects), the listeners, libevent's own, logs and snapshots.
    public static let reserved = 64

    /// Raises the soft limit to the hard one (as pgbouncer and nginx do: a soft limit of 1024, a
    /// common default, would cap a service meant for 10,000 connections near 1,000) and returns
    /// the soft limit now in force (nil when it cannot be read, or is unlimited).
    @discardableResult
    public static func raiseSoftToHard() -> Int? {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return nil }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        return limit.rlim_cur == rlim_t.max ? nil : Int(clamping: limit.rlim_cur)  // RLIM_INFINITY
    }

    /// The connections a soft limit of `softLimit` descriptors leaves room for.
    public static func connections(allowedBy softLimit: Int) -> Int { max(1, softLimit - reserved) }
}
