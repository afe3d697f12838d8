// A private PostgreSQL cluster in a folder of ours: initdb on first use, started and stopped by Herald.
import Foundation
import Glibc

/// A PostgreSQL server Herald runs itself, for development (`herald serve` without a database
/// URL, in `.herald/postgres`) and for tests (a throwaway folder per test run). As root it runs
/// the PostgreSQL programs as the `postgres` user, as PostgreSQL refuses to run as root.
public final class LocalCluster: @unchecked Sendable {
    /// The folder holding the cluster (PG_VERSION, postgresql.conf, ...).
    public let dataDirectory: String
    public private(set) var port: Int
    public let binDirectory: String
    /// Two lock files beside the folder (initdb wants the folder empty), open while this process
    /// uses the cluster: `<folder>.lock`, held exclusively while a process creates, starts or stops
    /// it (and saying whether a Herald process started the server), and `<folder>.in-use`, held
    /// shared by every process using it, so the last one to stop can tell it is the last.
    private var setUpFD: Int32 = -1
    private var inUseFD: Int32 = -1
    /// How long `start` and `stop` wait for another process to finish setting the cluster up
    /// before giving up with an error naming it (`HERALD_CLUSTER_LOCK_TIMEOUT`, seconds; 300).
    public var setUpLockTimeout: Double =
        ProcessInfo.processInfo.environment["HERALD_CLUSTER_LOCK_TIMEOUT"].flatMap { Double($0) } ?? 300
    /// More server settings for `start` (`name=value`, passed as `-c` after Herald's own, so they
    /// win over them): e.g. `shared_preload_libraries=citus` for a Citus node.
    public var serverSettings: [String] = []

    /// A libpq conninfo value, quoted when it holds a space, a quote or a backslash (or is empty).
    static func conninfoValue(_ value: String) -> String {
        guard value.isEmpty || value.contains(where: { $0 == " " || $0 == "'" || $0 == "\\" }) else { return value }
        return "'" + value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'") + "'"
    }

    /// Connection string to the `postgres` database, or any other with `database:`.
    public func connectionString(database: String = "postgres") -> String {
        "host=127.0.0.1 port=\(port) user=postgres dbname=\(Self.conninfoValue(database))"
    }

    /// The same server and database as a postgresql:// URL, for psql and other tools
    /// (`herald db url`): `psql "$(herald db url)"`.
    public func url(database: String = "postgres") -> String {
        var unreserved = CharacterSet.alphanumerics
        unreserved.insert(charactersIn: "-._~")
        let name = database.addingPercentEncoding(withAllowedCharacters: unreserved) ?? database
        return "postgresql://postgres@127.0.0.1:\(port)/\(name)"
    }

    /// Where the port chosen at the first start is kept, so the cluster keeps it across starts
    /// and a URL printed once (`herald db url`) stays right.
    private var portFile: String { dataDirectory + "/herald.port" }

    /// The port recorded at an earlier start if nothing else holds it now, else a free one.
    private func choosePort(log: (String) -> Void) -> Int {
        let text = try? String(contentsOfFile: portFile, encoding: .utf8)
        guard let recorded = text.flatMap({ Int($0.trimmingTrailingNewlines) }), (1...65_535).contains(recorded) else { return Self.freePort() }
        if Self.bindable(recorded, reusingAddress: true) { return recorded }
        let port = Self.freePort()
        log("the private PostgreSQL's port \(recorded) is taken by another process; using \(port) from now on")
        return port
    }

    private func recordPort() {
        try? "\(port)\n".write(toFile: portFile, atomically: true, encoding: .utf8)
    }

    /// Finds the PostgreSQL server programs, or explains how to get them.
    public static func findBinaries() throws(StoreError) -> String {
        try findBinaries(in: defaultSearchPath())
    }

    /// Where the server programs are looked for: $HERALD_PG_BIN, /usr/lib/postgresql/*/bin (newest first), $PATH.
    public static func defaultSearchPath() -> [String] {
        var candidates: [String] = []
        if let env = ProcessInfo.processInfo.environment["HERALD_PG_BIN"] { candidates.append(env) }
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        for v in versions.sorted(by: { (Int($0) ?? 0) > (Int($1) ?? 0) }) { candidates.append("/usr/lib/postgresql/\(v)/bin") }
        for p in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") { candidates.append(String(p)) }
        return candidates
    }

    /// The first folder of `candidates` holding initdb and pg_ctl.
    public static func findBinaries(in candidates: [String]) throws(StoreError) -> String {
        for dir in candidates where FileManager.default.isExecutableFile(atPath: dir + "/initdb")
            && FileManager.default.isExecutableFile(atPath: dir + "/pg_ctl") {
            return dir
        }
        throw .configuration("""
            PostgreSQL's server programs (initdb, pg_ctl) were not found in /usr/lib/postgresql/*/bin, \
            $HERALD_PG_BIN or $PATH, so Herald cannot start its private database. Install them \
            (Debian: apt-get install postgresql) or pass --database-url to use a server you run.
            """)
    }

    /// Prepares (but does not start) a cluster in `dataDirectory`; `port` nil picks a free one.
    public init(dataDirectory: String, port: Int? = nil) throws(StoreError) {
        self.dataDirectory = dataDirectory
        self.binDirectory = try Self.findBinaries()
        self.port = port ?? 0
    }

    deinit { unlock(&setUpFD); unlock(&inUseFD) }

    private static var isRoot: Bool { geteuid() == 0 }

    /// Creates the cluster if the folder has none, then starts it unless it already runs, then runs
    /// `whileAlone` (e.g. creating a database): all while no other Herald process creates, starts or
    /// stops this cluster. Several processes may then use it at once; the last of them to `stop`
    /// stops the server, if a Herald process started it.
    public func start(log: (String) -> Void = { _ in }, whileAlone: () throws(StoreError) -> Void = {}) throws(StoreError) {
        try lockSetUp(log: log)
        defer { unlock(&setUpFD) }
        if inUseFD < 0 { inUseFD = try openLockFile(dataDirectory + ".in-use") }
        try flockRetrying(inUseFD, LOCK_SH)
        if !FileManager.default.fileExists(atPath: dataDirectory + "/PG_VERSION") { try create(log: log) }
        var startedNow = false
        if let running = runningPort() {
            port = running
            log("using the private PostgreSQL already running on port \(port)")
        } else {
            if port == 0 { port = choosePort(log: log) }
            let options = [
                "-c listen_addresses=127.0.0.1", "-c port=\(port)", "-c unix_socket_directories=''",
                "-c max_connections=300", "-c shared_buffers=256MB", "-c max_wal_size=4GB",
                "-c log_min_messages=warning", "-c timezone=UTC",
            ].joined(separator: " ") + serverSettings.map { " -c " + $0 }.joined()
            try run("pg_ctl", ["-D", dataDirectory, "-l", dataDirectory + "/server.log", "-o", options, "-w", "-t", "60", "start"],
                    what: "pg_ctl start")
            setStartedByHerald()
            recordPort()
            startedNow = true
            log("private PostgreSQL listening on 127.0.0.1:\(port)")
        }
        do {
            try whileAlone()
        } catch {
            // Never leave behind a server this call started and nobody can use.
            if startedNow, flock(inUseFD, LOCK_EX | LOCK_NB) == 0 {
                log("stopping the private PostgreSQL again: \(error)")
                stopServer(mode: "fast")
            }
            throw error
        }
    }

    /// initdb into a folder of its own beside `dataDirectory`, renamed into place only once it
    /// succeeded: a Herald killed during initdb would leave a half-built cluster that looks usable
    /// (its PG_VERSION written first), and a server started on it crashes in a loop.
    private func create(log: (String) -> Void) throws(StoreError) {
        let fm = FileManager.default
        let parent = (dataDirectory as NSString).deletingLastPathComponent
        let base = (dataDirectory as NSString).lastPathComponent + ".initdb-"
        // Left by an initdb whose Herald died: its pid is in the name.
        for name in (try? fm.contentsOfDirectory(atPath: parent)) ?? [] where name.hasPrefix(base) {
            if let pid = Int32(name.dropFirst(base.count)), Glibc.kill(pid, 0) != 0 && errno == ESRCH {
                try? fm.removeItem(atPath: parent + "/" + name)
            }
        }
        let building = dataDirectory + ".initdb-\(getpid())"
        try? fm.removeItem(atPath: building)
        log("creating a private PostgreSQL cluster in \(dataDirectory)")
        try? fm.createDirectory(atPath: building, withIntermediateDirectories: true)
        try makeOwnedByServerUser(building)
        do {
            try run("initdb", ["-D", building, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"], what: "initdb")
        } catch {
            try? fm.removeItem(atPath: building)
            throw error
        }
        // Over an empty folder (one made by hand beforehand) too; a folder with files in it stays.
        guard rename(building, dataDirectory) == 0 else {
            let reason = String(cString: strerror(errno))
            try? fm.removeItem(atPath: building)
            throw .configuration("Cannot move the new PostgreSQL cluster into \(dataDirectory) (\(reason)): the folder exists and is not a cluster (no PG_VERSION). Empty or remove it, or pass --database-url.")
        }
    }

    /// Stops the server if a Herald process started it and no other process uses it now (`fast`:
    /// rolls back open transactions, flushes). One still in use is left running for the last one.
    public func stop(mode: String = "fast", log: (String) -> Void = { _ in }) {
        guard inUseFD >= 0, (try? lockSetUp(log: log)) != nil else { return }
        defer { unlock(&setUpFD); unlock(&inUseFD) }
        guard flock(inUseFD, LOCK_EX | LOCK_NB) == 0 else {
            log("leaving the private PostgreSQL running: another Herald process uses it (the last one stops it)")
            return
        }
        guard runningPort() != nil else { return }
        guard startedByHerald else {
            log("leaving the private PostgreSQL running: it was not started by Herald")
            return
        }
        log("stopping the private PostgreSQL (the last Herald process using it)")
        stopServer(mode: mode)
    }

    private func stopServer(mode: String) {
        _ = try? run("pg_ctl", ["-D", dataDirectory, "-m", mode, "-w", "stop"], what: "pg_ctl stop")
        _ = ftruncate(setUpFD, 0)
    }

    /// Whether a Herald process started the running server: `<folder>.lock` holds the pid of the
    /// postmaster it started, and that is still the one running. A server an operator started is
    /// left alone, also one started by hand after Herald's had stopped (the pid differs). Read and
    /// set under the lock.
    private var startedByHerald: Bool {
        var bytes = [UInt8](repeating: 0, count: 16)
        let n = pread(setUpFD, &bytes, bytes.count, 0)
        guard n > 0, let recorded = Int32(String(decoding: bytes[..<n], as: UTF8.self).trimmingTrailingNewlines) else { return false }
        return postmasterPID() == recorded
    }

    private func setStartedByHerald() {
        _ = ftruncate(setUpFD, 0)
        if let pid = postmasterPID() {
            let text = Array("\(pid)\n".utf8)
            _ = pwrite(setUpFD, text, text.count, 0)
        }
    }

    /// The pid on postmaster.pid's first line, if the file is there.
    private func postmasterPID() -> Int32? { postmasterFile()?.pid }

    /// postmaster.pid's pid (first line) and port (fourth line), if the file is there.
    private func postmasterFile() -> (pid: Int32, port: Int?)? {
        guard let text = try? String(contentsOfFile: dataDirectory + "/postmaster.pid", encoding: .utf8) else { return nil }
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        guard let pid = lines.first.flatMap({ Int32($0) }) else { return nil }
        return (pid, lines.count > 3 ? Int(lines[3]) : nil)
    }

    /// Takes `<folder>.lock` exclusively, waiting (and saying so, with the holder's pid) while
    /// another process holds it — at most `setUpLockTimeout` seconds: a holder that is stuck (a
    /// stopped process, a hung pg_ctl) would otherwise hang every Herald after it without a word.
    private func lockSetUp(log: (String) -> Void) throws(StoreError) {
        setUpFD = try openLockFile(dataDirectory + ".lock")
        if flock(setUpFD, LOCK_EX | LOCK_NB) == 0 { return }
        let holder = Self.flockHolder(of: setUpFD).map { " (pid \($0)\(Self.commandLine(of: $0).map { ": \($0)" } ?? ""))" } ?? ""
        log("waiting for another Herald process\(holder) to finish starting, checking or stopping the private PostgreSQL in \(dataDirectory)")
        let deadline = Date().addingTimeInterval(setUpLockTimeout)
        while flock(setUpFD, LOCK_EX | LOCK_NB) != 0 {
            guard errno == EWOULDBLOCK || errno == EINTR else {
                let reason = String(cString: strerror(errno))
                unlock(&setUpFD)
                throw .configuration("Cannot lock \(dataDirectory).lock (\(reason)).")
            }
            guard Date() < deadline else {
                let now = Self.flockHolder(of: setUpFD)
                unlock(&setUpFD)
                let who = now.map { "process \($0)\(Self.commandLine(of: $0).map { " (\($0))" } ?? "")" } ?? "another process"
                throw .configuration("""
                    Waited \(Int(setUpLockTimeout)) s for \(dataDirectory).lock, which \(who) holds while it \
                    creates, starts or stops the private PostgreSQL there; that normally takes seconds. If \
                    that process is stuck, stop it\(now.map { " (kill \($0))" } ?? "") and run this again, or \
                    pass --database-url to use a server you run.
                    """)
            }
            usleep(50_000)
        }
    }

    /// The pid holding an exclusive `flock` on the file open as `fd`, from /proc/locks (Linux;
    /// nil when it cannot be told).
    static func flockHolder(of fd: Int32) -> Int32? {
        var st = stat()
        guard fstat(fd, &st) == 0, let text = try? String(contentsOfFile: "/proc/locks", encoding: .utf8) else { return nil }
        let dev = UInt64(st.st_dev)
        let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & ~0xfff), minor = (dev & 0xff) | ((dev >> 12) & ~0xff)
        let file = String(major, radix: 16).leftPadded(to: 2) + ":" + String(minor, radix: 16).leftPadded(to: 2) + ":\(st.st_ino)"
        // "1: FLOCK  ADVISORY  WRITE 3569 fe:00:2753297 0 EOF"; waiters' lines have "->" after the number.
        for line in text.split(separator: "\n") {
            let f = line.split(separator: " ")
            guard f.count >= 6, f[1] == "FLOCK", f[3] == "WRITE", f[5] == file else { continue }
            return Int32(f[4])
        }
        return nil
    }

    /// A process's command line, its arguments joined by spaces (nil once it is gone).
    static func commandLine(of pid: Int32) -> String? {
        guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline"), !data.isEmpty else { return nil }
        return data.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }.joined(separator: " ")
    }

    private func openLockFile(_ path: String) throws(StoreError) -> Int32 {
        try? FileManager.default.createDirectory(atPath: (dataDirectory as NSString).deletingLastPathComponent,
                                                 withIntermediateDirectories: true)
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw .configuration("Cannot open \(path) (\(String(cString: strerror(errno)))): Herald locks it while it starts, uses or stops the private PostgreSQL in \(dataDirectory). Check the folder's permissions, or pass --database-url.")
        }
        return fd
    }

    private func flockRetrying(_ fd: Int32, _ mode: Int32) throws(StoreError) {
        while flock(fd, mode) != 0 {
            guard errno == EINTR else { throw .configuration("Cannot lock a lock file of \(dataDirectory) (\(String(cString: strerror(errno)))).") }
        }
    }

    /// Closes a lock file, which releases its lock.
    private func unlock(_ fd: inout Int32) {
        guard fd >= 0 else { return }
        close(fd)
        fd = -1
    }

    /// Crashes the server as a power cut would (`immediate`), for outage tests; `start()` restarts it.
    public func kill() {
        _ = try? run("pg_ctl", ["-D", dataDirectory, "-m", "immediate", "-w", "stop"], what: "pg_ctl stop")
    }

    /// The port of a server already running on this folder, read from postmaster.pid.
    private func runningPort() -> Int? {
        guard let file = postmasterFile(), Glibc.kill(file.pid, 0) == 0 else { return nil }
        return file.port
    }

    private func makeOwnedByServerUser(_ path: String) throws(StoreError) {
        guard Self.isRoot else { return }
        try run("/bin/chown", ["-R", "postgres:postgres", path], what: "chown", asServerUser: false)
        chmod(path, 0o700)
        // The server user must be able to reach the folder: parents need search permission.
        var parent = (path as NSString).deletingLastPathComponent
        while parent != "/" && !parent.isEmpty {
            var st = stat()
            if stat(parent, &st) == 0, st.st_mode & 0o001 == 0 { chmod(parent, st.st_mode | 0o711) }
            parent = (parent as NSString).deletingLastPathComponent
        }
    }

    @discardableResult
    private func run(_ program: String, _ arguments: [String], what: String, asServerUser: Bool = true) throws(StoreError) -> String {
        let path = program.hasPrefix("/") ? program : binDirectory + "/" + program
        let argv = asServerUser && Self.isRoot
            ? ["/usr/sbin/runuser", "-u", "postgres", "--", path] + arguments
            : [path] + arguments
        let (status, text) = ChildProcess.run(argv)
        guard status == 0 else {
            var message = "\(what) failed (exit status \(status)) for the private PostgreSQL in \(dataDirectory)."
            message += "\n" + text.trimmingTrailingNewlines
            if let log = try? String(contentsOfFile: dataDirectory + "/server.log", encoding: .utf8) {
                message += "\nLast lines of server.log:\n" + log.split(separator: "\n").suffix(8).joined(separator: "\n")
            }
            throw .configuration(message)
        }
        return text
    }

    /// A TCP port on 127.0.0.1 nobody uses right now, chosen below the kernel's ephemeral range
    /// (`ip_local_port_range`): a port the kernel handed out (bind to 0) is from that range, and
    /// between this call and the listener's bind any outgoing connection of the process — a
    /// test's client, a PostgreSQL session — could be given it, so the listener failed with
    /// "Address already in use" now and then. Below the range only
    /// another listener can take it. Falls back to a kernel-assigned port.
    public static func freePort() -> Int {
        let low = ephemeralRangeLow() ?? 32_768
        if low > 11_024 {
            for _ in 0..<256 {
                let port = Int.random(in: 10_000..<low)
                if bindable(port) { return port }
            }
        }
        return kernelAssignedPort()
    }

    /// The first port of the kernel's ephemeral range, nil when it cannot be read.
    static func ephemeralRangeLow() -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8) else { return nil }
        return text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }).first.flatMap { Int($0) }
    }

    /// Whether a socket can be bound to 127.0.0.1:`port` now (nothing listens or lingers there).
    /// `reusingAddress`: as a server binds (SO_REUSEADDR), so connections lingering in TIME_WAIT
    /// after the last server there stopped do not count; only a listener does.
    static func bindable(_ port: Int, reusingAddress: Bool = false) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        if reusingAddress {
            var on: Int32 = 1
            _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
        }
        var addr = loopback(port: port)
        let len = socklen_t(MemoryLayout<sockaddr_in>.size)
        return withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) } } == 0
    }

    /// 127.0.0.1:`port` as a socket address (0: the kernel picks the port at bind).
    static func loopback(port: Int) -> sockaddr_in {
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = UInt16(port).bigEndian
        return addr
    }

    /// A port the kernel picks (from its ephemeral range).
    static func kernelAssignedPort() -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = loopback(port: 0)
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) } }
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
        return Int(UInt16(bigEndian: addr.sin_port))
    }
}

private extension String {
    func leftPadded(to width: Int) -> String { count >= width ? self : String(repeating: "0", count: width - count) + self }
}
