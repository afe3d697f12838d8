// One `herald serve` per database: a session advisory lock held for the service's life.
import Glibc

/// Refuses a second `herald serve` on a database one already serves. Two would both fold the
/// log, both fire every timer and both append the deliveries (the second's careful path skips
/// rows already stored, but each consumer stream and every decision made twice on its own is
/// a bug waiting to happen); SPEC §9's leases that would let several share users are not built.
///
/// The lock is PostgreSQL's session advisory lock `key` on a connection of its own, kept open
/// until `release` (a process that dies loses it with its connection). A start-up waits up to
/// `waitMilliseconds` for it — a process just killed may still hold it until its backend notices
/// — then fails saying who holds it. Not covered: a PostgreSQL restart drops the lock with every
/// session, and the running service does not take it again (a second start-up then succeeds).
public final class InstanceLock {
    /// The advisory lock key (Migrator serializes migrations on 7271001).
    public static let key: Int64 = 7_271_002
    private var connection: PGConnection?

    private init(connection: PGConnection) { self.connection = connection }

    /// Takes the lock on a new connection to `url`, waiting up to `waitMilliseconds`.
    public static func acquire(_ url: String, waitMilliseconds: Int = 5_000,
                               sleep: (Int) -> Void = InstanceLock.pause) throws(StoreError) -> InstanceLock {
        let connection = try PGConnection.connect(url)
        try connection.execute("SET application_name = 'herald serve'")
        var waited = 0
        while true {
            if try connection.execute("SELECT pg_try_advisory_lock($1)", [String(key)]).string(0, 0) == "t" {
                return InstanceLock(connection: connection)
            }
            if waited >= waitMilliseconds { break }
            sleep(100)
            waited += 100
        }
        let holder = try? connection.execute("""
            SELECT a.pid, coalesce(host(a.client_addr), 'a local socket'), a.application_name,
                   to_char(a.backend_start AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
            FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
            WHERE l.locktype = 'advisory' AND l.granted AND l.classid = 0 AND l.objid = $1 AND l.objsubid = 1
              AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
            """, [String(key)])
        connection.close()
        let who = holder.flatMap { r in r.rowCount > 0
            ? "PostgreSQL backend \(r.string(0, 0) ?? "?") (\(r.string(0, 2) ?? ""), connected from \(r.string(0, 1) ?? "?") since \(r.string(0, 3) ?? "?"))"
            : nil } ?? "another session"
        throw .configuration("""
            Another herald serve is already serving this database: \(who) holds Herald's instance lock \
            (advisory lock \(key)), waited \(waitMilliseconds / 1000) s. Two services on one log would both fire \
            every timer. Stop the other one (or give this one another database) and start again.
            """)
    }

    /// Gives the lock up (closing its connection).
    public func release() {
        connection?.close()
        connection = nil
    }

    deinit { release() }

    /// Sleeps `ms` milliseconds (the wait between tries).
    public static func pause(_ ms: Int) {
        var spec = timespec(tv_sec: ms / 1000, tv_nsec: (ms % 1000) * 1_000_000)
        _ = nanosleep(&spec, nil)
    }
}
