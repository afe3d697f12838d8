// The command-line tools' exit codes and how errors reach them.
import ArgumentParser
import Foundation
import HeraldStore

/// Exit codes: 0 success, 1 a check failed (replay found a difference, health found the service not
/// answering), 2 an error (bad input or usage, unreachable database, unknown user). `Herald.main`
/// turns ArgumentParser's own codes (64 for a usage error, 1 for any other thrown error) into 2, so
/// 1 always means a failed check.
extension ExitCode {
    public static let differences = ExitCode(1)
    public static let error = ExitCode(2)
}

/// Runs `body`, turning store errors into a readable message on stderr and exit code 2. The process
/// then ends, so the message says what to do and never that Herald retries (the running service's
/// own reconnect messages say that: `StoreError.description`). `serve` too: an error that reaches
/// here ended its start-up or its loop.
public func reportingErrors(_ body: () throws -> Void) throws {
    do {
        try body()
    } catch let error as StoreError {
        Log.info("error: \(error.oneShotDescription)")
        throw ExitCode.error
    }
}

/// Says on stderr that `what` has no events in the log, and fails with exit code 2: a name with no
/// history is a mistake to report (a typo would otherwise print an empty state or a clean replay).
public func noEvents(_ what: String, plural: Bool = false,
              hint: String = "check the name (SELECT DISTINCT user_id FROM events lists every user)") -> ExitCode {
    Log.info("error: \(what) \(plural ? "have" : "has") no events in the log; \(hint)")
    return ExitCode.error
}

/// Parses the arguments as `Root`'s and runs the command they name, with the exit codes above: a
/// value the command checked itself is said like the commands' other errors, and ArgumentParser's
/// own codes (64 for a usage error, 1 for any error it does not know) become 2, so a script can
/// rely on 1 meaning a failed check (differences, an unhealthy service) and nothing else.
public func runCommandLine<Root: ParsableCommand>(_ root: Root.Type) -> Never {
    func fail(_ error: Error) -> Never {
        if Root.exitCode(for: error) == .success || (error as? ExitCode) == .differences { Root.exit(withError: error) }
        let message = Root.fullMessage(for: error)
        if !message.isEmpty { FileHandle.standardError.write(Data((message + "\n").utf8)) }
        Root.exit(withError: ExitCode.error)
    }
    var command: ParsableCommand
    do {
        command = try Root.parseAsRoot(nil)
    } catch {
        fail(error)
    }
    do {
        try command.run()
    } catch let error as ValidationError {
        // ArgumentParser's text would follow it with the root command's usage, which does not help here.
        Log.info("error: \(error.message)")
        Root.exit(withError: ExitCode.error)
    } catch {
        fail(error)
    }
    Root.exit()
}
