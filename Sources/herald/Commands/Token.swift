// `herald token hash`: the SHA-256 of a token, for the tokens file's "sha256" field.
import ArgumentParser
import HeraldCommandLine
import Foundation
import HeraldCore

struct Token: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Access tokens.", subcommands: [Hash.self])

    struct Hash: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the SHA-256 (hex) of a token read from stdin, for \"sha256\" in the tokens file.",
            discussion: "One trailing newline is ignored: `printf %s \"$TOKEN\" | herald token hash` and `herald token hash < token.txt` agree.")

        func run() throws {
            var bytes = [UInt8](FileHandle.standardInput.readDataToEndOfFile())
            if bytes.last == 0x0A { bytes.removeLast() }
            if bytes.last == 0x0D { bytes.removeLast() }
            guard bytes.count >= 8 else {
                Log.info("error: the token on stdin is \(bytes.count) bytes; tokens need at least 8 (use e.g. `openssl rand -hex 32`)")
                throw ExitCode.error
            }
            print(SHA256.hex(bytes))
        }
    }
}
