// The `rules_versions` table: where in the log each rules version took over (schema/001_tables.sql).
import HeraldCore

/// Reads and records the rules versions a log was decided under (`RulesHistory`).
public enum RulesVersionStore {
    /// Every recorded change, in log order (none: no build has served the log yet; it is decided by
    /// this build's version, `RulesHistory.initial`).
    public static func history(_ connection: PGConnection, partition: Int = 0) throws(StoreError) -> RulesHistory {
        let r = try connection.execute("""
            SELECT from_seq, (extract(epoch FROM at) * 1000)::bigint, version FROM rules_versions WHERE partition = $1 ORDER BY id
            """, [String(partition)])
        let changes = (0..<r.rowCount).map { i in
            RulesHistory.Change(fromSeq: r.int64(i, 0) ?? 1, at: Instant(millisecondsSinceEpoch: r.int64(i, 1) ?? 0),
                                version: r.string(i, 2) ?? "")
        }
        return RulesHistory(changes: changes)
    }

    /// The history to decide a fold of the log by: the recorded one, or `only` for every event
    /// and timer (a what-if). Throws when it names a version this build does not know.
    public static func deciding(_ connection: PGConnection, partition: Int = 0, only: String? = nil) throws(StoreError) -> RulesHistory {
        let rules: RulesHistory
        if let only { rules = .only(only) } else { rules = try history(connection, partition: partition) }
        try requireKnown(rules)
        return rules
    }

    /// Records that `version` decides from the event after the log's head and the timers due
    /// after `at` on, when the log's latest version is another; or, when none is recorded yet,
    /// that it decides the whole log (from seq 1: no build decided any of it before). Returns the
    /// history to decide by and the change recorded, if any.
    /// Fails with a clear error when the log was decided by a version this build does not know
    /// (a newer build wrote it): folding it by older rules would decide differently.
    public static func takeOver(_ connection: PGConnection, partition: Int = 0, version: String = Engine.currentRulesVersion,
                                at: Instant) throws(StoreError) -> (history: RulesHistory, recorded: RulesHistory.Change?) {
        var history = try deciding(connection, partition: partition)
        // Recorded on a log with none yet too, so the table names the version of every part.
        guard history.changes.isEmpty || history.latest != version else { return (history, nil) }
        // Timers the stopped build fired are its own, even due after `at` (a wall clock that went
        // back across the restart): the switch is no earlier than any stored decision (cursor
        // order is not time order: two delivery writers, timers fired per user) nor the previous
        // switch. A scan of `deliveries`, at an upgrade's start-up only.
        let newest = try connection.execute("SELECT (extract(epoch FROM max(at)) * 1000)::bigint FROM deliveries WHERE partition = $1", [String(partition)])
        var since = max(at, newest.int64(0, 0).map(Instant.init(millisecondsSinceEpoch:)) ?? at)
        if let previous = history.changes.last { since = max(since, previous.at) }
        let fromSeq = history.changes.isEmpty ? 1 : try EventReader.head(connection, partition: partition) + 1
        let change = RulesHistory.Change(fromSeq: fromSeq, at: since, version: version)
        try connection.execute("INSERT INTO rules_versions (partition, from_seq, at, version) VALUES ($4, $1, $2, $3)",
                               [String(change.fromSeq), change.at.rfc3339, change.version, String(partition)])
        history.append(change)
        return (history, change)
    }

    /// Throws when `history` names a version this build cannot decide by.
    public static func requireKnown(_ history: RulesHistory) throws(StoreError) {
        let unknown = history.unknownVersions
        guard unknown.isEmpty else {
            throw StoreError.configuration("this log was decided by rules version \(unknown.joined(separator: ", ")), which this build does not know "
                + "(it knows \(Engine.knownRulesVersions.joined(separator: ", "))): a newer build served it. Run that build or a newer one; "
                + "an older build would decide its events differently.")
        }
    }
}
