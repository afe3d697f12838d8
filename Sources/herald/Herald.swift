// The `herald` executable: argument parsing only; each subcommand hands off to a library.
import ArgumentParser

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
        main(nil)
    }
}
