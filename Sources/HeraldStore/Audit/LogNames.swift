// Whether a name the operator typed has any history: the audit commands refuse names with none.

/// Lookups that let `state`, `pending`, `replay` and `explain` tell an unknown name (a typo, another
/// database) from a known one whose history is simply empty at that point.
public enum LogNames {
    /// Of `users`, those with no event at all in the log, in the order given (`events_user_seq`).
    public static func usersWithoutEvents(_ connection: PGConnection, _ users: [String]) throws(StoreError) -> [String] {
        var missing: [String] = []
        for user in users {
            let r = try connection.execute("SELECT EXISTS (SELECT 1 FROM events WHERE user_id = $1)", [user])
            if r.string(0, 0) != "t" { missing.append(user) }
        }
        // On a retained log a user's events may all be in the archive: the snapshot knows them.
        if !missing.isEmpty {
            let retained = try RetainedSnapshot.users(connection)
            missing.removeAll { retained.contains($0) }
        }
        return missing
    }
}
