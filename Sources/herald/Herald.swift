// The `herald` executable: argument parsing only; each subcommand hands off to a library.
import ArgumentParser
import Foundation
import HeraldCommandLine
import HeraldCore

@main
struct Herald: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "herald",
        abstract: "An event-sourced notification scheduler on PostgreSQL.",
        version: "herald \(HeraldVersion.number)",
        subcommands: [Serve.self, Migrate.self, Replay.self, Explain.self, State.self, Pending.self, Export.self, Import.self, Tail.self, Consumers.self, Bridge.self, Status.self, Health.self, Erase.self, Retain.self, Bench.self, Token.self, Database.self]
    )

    static func main() { runCommandLine(Herald.self) }
}
