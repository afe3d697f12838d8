// The `herald` executable: argument parsing only; each subcommand hands off to a library.
import ArgumentParser
import Foundation

@main
struct Herald: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "herald",
        abstract: "An event-sourced notification scheduler on PostgreSQL.",
        subcommands: [Serve.self, Migrate.self, Replay.self, Explain.self, State.self, Pending.self, Export.self, Import.self, Tail.self, Bench.self, Token.self]
    )

    /// Tunes glibc's allocator for the loop's batches (a re-execution, once: `MallocTuning`), then parses as usual.
    static func main() {
        MallocTuning.reexecIfNeeded()
        var command: ParsableCommand
        do {
            command = try parseAsRoot(nil)
        } catch {
            fail(error)
        }
        do {
            try command.run()
        } catch let error as ValidationError {
            // A value the command checked itself: said like the commands' other errors (ArgumentParser's
            // text would follow it with the root command's usage, which does not help here).
            Log.info("error: \(error.message)")
            exit(withError: ExitCode.error)
        } catch {
            fail(error)
        }
    }

    /// README: 0 success, 1 a check that found differences, 2 an error. ArgumentParser exits 64 on
    /// a usage error (an unknown option, a missing value) and 1 on any error it does not know:
    /// both become 2, so a script can rely on 1 meaning differences and nothing else.
    static func fail(_ error: Error) -> Never {
        if exitCode(for: error) == .success || (error as? ExitCode) == .differences { exit(withError: error) }
        let message = fullMessage(for: error)
        if !message.isEmpty { FileHandle.standardError.write(Data((message + "\n").utf8)) }
        exit(withError: ExitCode.error)
    }
}
