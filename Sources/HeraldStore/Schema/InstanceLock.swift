// One `herald serve` per database: a session advisory lock held by the events writer's connection.
import Glibc

/// Refuses a second `herald serve` on a database one already serves. Two would both fold the
/// log, both fire every timer and both append deliveries; SPEC §9's leases that would let
/// several share users are not built.
///
/// The lock is PostgreSQL's session advisory lock `key`, taken on the connection that becomes
/// the events writer: it lives as long as that session (a process that dies, or a PostgreSQL
/// restart, drops it). The service takes it at start-up, waiting a little for a holder that is
/// going away, and tries again at every reconnect of its writer (best effort: found taken, it
/// warns and serves on). A start-up guard, not a fence: SPEC §9's leases would be one. Needs a
/// direct connection or session pooling (under transaction pooling a session lock means nothing).
public enum InstanceLock {
    /// The advisory lock key (Migrator serializes migrations on 7271001).
    public static let key: Int64 = 7_271_002

    /// Takes the lock on `connection`, trying every 100 ms for up to `waitMilliseconds`; throws
    /// `StoreError.configuration` naming the holder when another session keeps it.
    public static func take(_ connection: PGConnection, waitMilliseconds: Int = 5_000,
                            sleep: (Int) -> Void = InstanceLock.pause) throws(StoreError) {
        var waited = 0
        while true {
            if try connection.execute("SELECT pg_try_advisory_lock($1)", [String(key)]).string(0, 0) == "t" { return }
            if waited >= waitMilliseconds { break }
            sleep(100)
            waited += 100
        }
        throw .configuration("""
            Another herald serve is already serving this database: \(holder(connection)) holds Herald's instance lock \
            (advisory lock \(key); waited \(waitMilliseconds / 1000) s). Two services on one log would both fire \
            every timer. Stop the other one (or give this one another database) and start again; if it is the \
            session of a herald serve that is gone, end it with SELECT pg_terminate_backend(<pid>).
            """)
    }

    /// A cluster member's share of the lock (`herald serve --instance`): members hold it together,
    /// and a single-instance `herald serve` (which takes it alone) cannot start beside them, nor
    /// they beside it.
    public static func takeShared(_ connection: PGConnection) throws(StoreError) {
        if try connection.execute("SELECT pg_try_advisory_lock_shared($1)", [String(key)]).string(0, 0) == "t" { return }
        throw .configuration("""
            A single-instance herald serve (started without --instance) is serving this database: \(holder(connection)) \
            holds Herald's instance lock (advisory lock \(key)). Cluster members and a single instance cannot share a \
            database: stop it, then start every instance with --instance NAME.
            """)
    }

    /// Who holds the lock, for the error: backend pid, application, address and start time.
    static func holder(_ connection: PGConnection) -> String {
        guard let r = try? connection.execute("""
            SELECT a.pid, coalesce(host(a.client_addr), 'a local socket'), a.application_name,
                   to_char(a.backend_start AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
            FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
            WHERE l.locktype = 'advisory' AND l.granted AND l.classid = 0 AND l.objid = $1 AND l.objsubid = 1
              AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
            """, [String(key)]), r.rowCount > 0 else { return "another session" }
        return "PostgreSQL backend \(r.string(0, 0) ?? "?") (\(r.string(0, 2) ?? ""), connected from \(r.string(0, 1) ?? "?") since \(r.string(0, 3) ?? "?"))"
    }

    /// Sleeps `ms` milliseconds (the wait between tries).
    public static func pause(_ ms: Int) {
        var spec = timespec(tv_sec: ms / 1000, tv_nsec: (ms % 1000) * 1_000_000)
        _ = nanosleep(&spec, nil)
    }
}
