// `herald bench`: runs `herald-bench`, the load generators built beside `herald`, so the shipped
// binary does not carry them.
import ArgumentParser
import Foundation
import Glibc
import HeraldCommandLine

struct Bench: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Benchmarks, each beside its baseline in the same run (runs herald-bench; `herald bench --help` lists them).")

    @Argument(parsing: .captureForPassthrough, help: "The benchmark and its options, as `herald-bench` takes them.")
    var arguments: [String] = []

    func run() throws {
        let here = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        let candidates = [here.appendingPathComponent("herald-bench").path]
            + (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map { "\($0)/herald-bench" }
        guard let path = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            Log.info("error: herald-bench was not found beside herald nor on PATH; build it with `swift build -c release --product herald-bench`")
            throw ExitCode.error
        }
        let argv = ([path] + (arguments.isEmpty ? ["--help"] : arguments)).map { strdup($0) } + [nil]
        execv(path, argv)
        Log.info("error: could not run \(path): \(String(cString: strerror(errno)))")
        throw ExitCode.error
    }
}
