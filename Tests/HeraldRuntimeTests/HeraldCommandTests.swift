// The built `herald` one-shot commands as a script meets them: exit codes (README: 0 success,
// 1 differences, 2 an error), stderr texts, and what replay --what-if / explain / state accept.
import Foundation
import HeraldCore
import HeraldRuntime
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct HeraldCommandTests {
    struct Outcome: CustomStringConvertible {
        var status: Int32
        var stdout: String
        var stderr: String
        var description: String { "exit \(status)\nstdout: \(stdout)\nstderr: \(stderr)" }
    }

    /// Runs the built `herald` with `arguments` (output through files: no pipe to fill up).
    static func herald(_ arguments: [String]) throws -> Outcome {
        let dir = FileManager.default.temporaryDirectory.path
        let tag = "herald-cmd-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let out = "\(dir)/\(tag).out", err = "\(dir)/\(tag).err"
        FileManager.default.createFile(atPath: out, contents: nil)
        FileManager.default.createFile(atPath: err, contents: nil)
        defer { try? FileManager.default.removeItem(atPath: out); try? FileManager.default.removeItem(atPath: err) }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: try ServeProcess.findBinary())
        p.arguments = arguments
        p.environment = ProcessInfo.processInfo.environment.filter { $0.key != "HERALD_DATABASE_URL" }
        p.standardInput = FileHandle.nullDevice
        p.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: out))
        p.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: err))
        try p.run()
        p.waitUntilExit()
        return Outcome(status: p.terminationStatus, stdout: try String(contentsOfFile: out, encoding: .utf8),
                       stderr: try String(contentsOfFile: err, encoding: .utf8))
    }

    @Test func oneShotCommandsSayWhatToDoAboutADatabaseTheyCannotUse() throws {
        // Unreachable: a port nothing listens on. A one-shot command gives up at once.
        let closed = "host=127.0.0.1 port=\(LocalClusterPort.free()) user=postgres dbname=herald connect_timeout=5"
        let unreachable = try Self.herald(["state", "alice", "--database-url", closed])
        #expect(unreachable.status == 2, "\(unreachable)")
        #expect(unreachable.stderr.contains("unreachable") && !unreachable.stderr.contains("retries"), "\(unreachable)")
        #expect(StoreError.unavailable("x").description.contains("Herald retries by itself"), "serve keeps its wording")

        // The server answers, but the database is not there (3D000): not "unreachable".
        let missingName = "herald_missing_\(getpid())"
        let missing = try Self.herald(["replay", "--database-url", TestPostgres.cluster().connectionString(database: missingName)])
        #expect(missing.status == 2, "\(missing)")
        #expect(missing.stderr.contains("“\(missingName)” does not exist") && missing.stderr.contains("createdb \(missingName)")
                && !missing.stderr.contains("unreachable") && !missing.stderr.contains("retries"), "\(missing)")

        // A database without Herald's tables (42P01): run herald migrate, or check the name.
        let empty = try TestPostgres.freshDatabase(migrated: false)
        for arguments in [["state", "alice"], ["replay"], ["explain", "com.example.mail", "m1"], ["export"]] {
            let r = try Self.herald(arguments + ["--database-url", empty])
            #expect(r.status == 2, "\(arguments): \(r)")
            #expect(r.stderr.contains("no Herald schema") && r.stderr.contains("herald migrate"), "\(arguments): \(r)")
        }
    }
}
