// Refuses a database that would lose acknowledged events in a crash (fsync or synchronous_commit off).

/// An acknowledgement promises the event survives a crash. That holds only with `fsync` on and
/// `synchronous_commit` at least `on` (remote levels are stronger and fine). `local` is fine too.
public enum DurabilityCheck {
    /// The settings that make acknowledgements unsafe, as "name=value" (empty when safe).
    public static func unsafeSettings(_ connection: PGConnection) throws(StoreError) -> [String] {
        let r = try connection.execute("SELECT current_setting('fsync'), current_setting('synchronous_commit')")
        var unsafe: [String] = []
        if r.string(0, 0) != "on" { unsafe.append("fsync=\(r.string(0, 0) ?? "?")") }
        if r.string(0, 1) == "off" { unsafe.append("synchronous_commit=off") }
        return unsafe
    }

    /// Throws a clear error unless the database is durable, or the operator explicitly accepted the risk.
    public static func require(_ connection: PGConnection, allowUnsafe: Bool, log: (String) -> Void) throws(StoreError) {
        let unsafe = try unsafeSettings(connection)
        guard !unsafe.isEmpty else { return }
        let what = unsafe.joined(separator: " and ")
        if allowUnsafe {
            log("WARNING: \(what): acknowledged events can be lost if PostgreSQL crashes (--unsafe-durability given)")
            return
        }
        throw .configuration("""
            Refusing to serve: the database runs with \(what), so an acknowledged event could be lost in a \
            crash, and Herald promises it never is. Turn it back on (ALTER SYSTEM SET … ; SELECT pg_reload_conf()), \
            or pass --unsafe-durability for a throwaway setup where losing acknowledged events is acceptable.
            """)
    }
}
