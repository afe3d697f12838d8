// Where Herald's database is: a URL the operator gave, or the private cluster in the project folder.
import Glibc
import HeraldCore

/// Resolves the database to use. With a URL (flag or `HERALD_DATABASE_URL`) that server is
/// used as is. Without one Herald runs its own cluster in `folder` (default `.herald/postgres`),
/// creates the `herald` database in it (or `database`; with `fresh`, dropped first if it exists,
/// so a demo or an experiment starts from an empty log each run without piling up databases), and
/// stops the cluster when `close()` is called by the last Herald process using it.
public final class DatabaseLocation: Sendable {
    public let url: String
    public let cluster: LocalCluster?

    private init(url: String, cluster: LocalCluster?) {
        self.url = url
        self.cluster = cluster
    }

    public static func resolve(url: String?, privateFolder: String = ".herald/postgres",
                               database: String = "herald", fresh: Bool = false,
                               log: (String) -> Void) throws(StoreError) -> DatabaseLocation {
        if let url, !url.isEmpty {
            if let failure = ConnectionString.parseFailure(url) { throw failure }
            return DatabaseLocation(url: url, cluster: nil)
        }
        let folder = privateFolder.hasPrefix("/") ? privateFolder : currentDirectory() + "/" + privateFolder
        let cluster = try LocalCluster(dataDirectory: folder)
        // Created while no other Herald process starts, stops or sets up this cluster: two started
        // at once no longer race on initdb, pg_ctl start or CREATE DATABASE.
        try cluster.start(log: log) { () throws(StoreError) in
            let admin = try PGConnection.connect(cluster.connectionString())
            defer { admin.close() }
            if fresh {
                log("dropping the private database \(database) (--fresh-private-database)")
                try admin.execute("DROP DATABASE IF EXISTS \(Self.quotedIdentifier(database)) WITH (FORCE)")
            }
            if try admin.execute("SELECT 1 FROM pg_database WHERE datname = $1", [database]).rowCount == 0 {
                try admin.execute("CREATE DATABASE \(Self.quotedIdentifier(database))")
            }
        }
        return DatabaseLocation(url: cluster.connectionString(database: database), cluster: cluster)
    }

    /// Stops the private cluster if a Herald process started it and no other one uses it now.
    public func close(log: (String) -> Void = { _ in }) { cluster?.stop(log: log) }

    private static func currentDirectory() -> String {
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getcwd(&buffer, buffer.count) != nil else { return "." }
        return String(cBuffer: buffer)
    }

    /// `name` as an SQL identifier, exactly as given: unquoted, `--private-database Demo` would
    /// create `demo` and then connect to `Demo`, which does not exist.
    static func quotedIdentifier(_ name: String) -> String {
        "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}
