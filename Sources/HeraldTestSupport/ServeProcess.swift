// A real `herald serve` child process for crash experiments: started, killed with SIGKILL, restarted.
import Foundation
import Glibc
import HeraldStore

/// Runs the built `herald` executable as a child process listening on a fixed loopback port,
/// so an experiment can `kill -9` it and start it again on the same port and database.
/// Its stderr goes to `logPath` (appended across restarts).
public final class ServeProcess: @unchecked Sendable {
    public let binary: String
    public let databaseURL: String
    public let port: Int
    public let logPath: String
    public var extraArguments: [String]
    /// Variables set (or, with nil, removed) in the child's environment; the rest is inherited.
    public var environmentChanges: [String: String?] = [:]
    /// Runs the service under this open-file limit, soft and hard (`ulimit -n` in a shell that
    /// then executes it, keeping the pid), as a host with a low limit would.
    public var openFileLimit: Int?
    /// The port `start()` pings to know the service is up (default `port`; a TLS service's `--plain-listen`).
    public var readinessPort: Int?
    public private(set) var pid: pid_t = 0
    public private(set) var starts = 0

    /// The executable: `$HERALD_BINARY`, else `.build/debug/herald` (or release) of this package.
    public static func findBinary(filePath: String = #filePath) throws -> String {
        if let env = ProcessInfo.processInfo.environment["HERALD_BINARY"], !env.isEmpty { return env }
        let root = ((filePath as NSString).deletingLastPathComponent as NSString).deletingLastPathComponent
        let packageRoot = (root as NSString).deletingLastPathComponent
        for config in ["debug", "release"] {
            let path = packageRoot + "/.build/\(config)/herald"
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        throw ExperimentError("""
            The herald executable was not found in \(packageRoot)/.build/debug or .build/release, so the \
            experiment cannot start a service to kill. Build it (swift build --product herald) or set HERALD_BINARY.
            """)
    }

    public init(databaseURL: String, port: Int = LocalClusterPort.free(), logPath: String, extraArguments: [String] = []) throws {
        self.binary = try Self.findBinary()
        self.databaseURL = databaseURL
        self.port = port
        self.logPath = logPath
        self.extraArguments = extraArguments
    }

    deinit { if pid > 0 { kill9() } }

    /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 and later), which Swift's Glibc
    /// module does not declare.
    private static let closeFrom: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32)? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32).self)
    }()

    /// Starts the service and waits until it answers a ping (start-up folds the whole log and fires overdue timers first).
    public func start(timeoutSeconds: Double = 120) throws {
        precondition(pid == 0, "already running")
        var argv = [binary, "serve", "--database-url", databaseURL, "--listen", "127.0.0.1:\(port)",
                    "--clock", "manual", "--start", "2026-03-27T07:00:00Z"] + extraArguments
        if let openFileLimit {
            argv = ["/bin/bash", "-c", "ulimit -n \(openFileLimit) || exit 1; exec \"$@\"", "sh"] + argv
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, logPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        // The child inherits no other descriptor of the test process: a parallel suite's sockets
        // held open by another test's server would hide their closing from theirs (and count
        // against a file limit).
        _ = Self.closeFrom?(&actions, 3)
        var cArgs: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
        defer { for p in cArgs { free(p) } }
        // The test runner's threads block or ignore some signals; the child starts with none
        // blocked and default handlers, or SIGTERM would never reach its loop.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t(), defaults = sigset_t()
        sigemptyset(&none)
        sigemptyset(&defaults)
        for s in [SIGTERM, SIGINT, SIGPIPE, SIGHUP] { sigaddset(&defaults, s) }
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var environment = ProcessInfo.processInfo.environment
        for (name, value) in environmentChanges { environment[name] = value }
        var cEnv: [UnsafeMutablePointer<CChar>?] = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for p in cEnv { free(p) } }
        var child: pid_t = 0
        let rc = posix_spawn(&child, argv[0], &actions, &attributes, &cArgs, &cEnv)
        guard rc == 0 else { throw ExperimentError("could not start \(binary): \(String(cString: strerror(rc)))") }
        pid = child
        starts += 1
        let deadline = Date().addingTimeInterval(timeoutSeconds)
        while Date() < deadline {
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid {
                pid = 0
                throw ExperimentError("herald serve exited during start-up (status \(status)); its log: \(logPath)\n\(tail())")
            }
            // The port accepts as soon as it listens; start-up may still be firing overdue timers.
            // Ready means a ping is answered.
            if let c = try? WireClient(port: readinessPort ?? port) {
                if let pong = try? c.request(#"{"op":"ping"}"#, timeoutMilliseconds: Int32(timeoutSeconds * 1000)), pong["op"] == "pong" { return }
            }
            usleep(20_000)
        }
        throw ExperimentError("herald serve did not listen on port \(port) within \(Int(timeoutSeconds)) s; its log: \(logPath)\n\(tail())")
    }

    /// SIGKILL, as a crash: no drain, no goodbye. Waits for the process to be gone.
    public func kill9() {
        guard pid > 0 else { return }
        Glibc.kill(pid, SIGKILL)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        pid = 0
    }

    /// SIGTERM: the graceful drain; waits for the exit (SIGKILL after `timeoutSeconds`). Returns
    /// false if it had to be killed.
    @discardableResult
    public func terminate(timeoutSeconds: Double = 30) -> Bool {
        guard pid > 0 else { return true }
        Glibc.kill(pid, SIGTERM)
        let deadline = Date().addingTimeInterval(timeoutSeconds)
        var status: Int32 = 0
        while waitpid(pid, &status, WNOHANG) != pid {
            if Date() > deadline { kill9(); return false }
            usleep(10_000)
        }
        pid = 0
        return true
    }

    /// Resident memory of the running service in KiB (from /proc), or nil.
    public func residentKilobytes() -> Int? {
        guard pid > 0, let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
        }
        return nil
    }

    /// The last lines of the service's log.
    public func tail(_ lines: Int = 15) -> String {
        ((try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "").split(separator: "\n").suffix(lines).joined(separator: "\n")
    }
}

/// A free loopback port (re-exported so experiments need not import HeraldStore).
public enum LocalClusterPort {
    public static func free() -> Int { LocalCluster.freePort() }
}

/// An experiment could not run (as opposed to: it ran and the checker found a violation).
public struct ExperimentError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
