// `herald token new` and `herald token hash`: make a token, and the SHA-256 the tokens file's "sha256" holds.
import ArgumentParser
import HeraldCommandLine
import Foundation
import HeraldCore

struct Token: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Access tokens.", subcommands: [New.self, Hash.self])

    struct New: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print a fresh random token and its SHA-256 (hex), as `herald token hash` prints it.",
            discussion: "The token is 32 bytes from the system's cryptographic random source, in hex. Give the token to the client; put only the sha256 in the tokens file.")

        func run() throws {
            // SystemRandomNumberGenerator reads the kernel's CSPRNG (getrandom(2) on Linux).
            var generator = SystemRandomNumberGenerator()
            let bytes = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
            let token = bytes.map { String($0, radix: 16).leftPadded(to: 2) }.joined()
            let hash = SHA256.hex(Array(token.utf8))
            print("token:  \(token)")
            print("sha256: \(hash)")
            print(#"The client presents the token; the tokens file holds only the sha256: {"name": "…", "sha256": "\#(hash)", "roles": […]}"#)
        }
    }

    struct Hash: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the SHA-256 (hex) of a token read from stdin, for \"sha256\" in the tokens file.",
            discussion: "One trailing newline is ignored: `printf %s \"$TOKEN\" | herald token hash` and `herald token hash < token.txt` agree.")

        func run() throws {
            var bytes = [UInt8](FileHandle.standardInput.readDataToEndOfFile())
            if bytes.last == 0x0A { bytes.removeLast() }
            if bytes.last == 0x0D { bytes.removeLast() }
            guard bytes.count >= 8 else {
                Log.info("error: the token on stdin is \(bytes.count) bytes; tokens need at least 8 (use `herald token new`)")
                throw ExitCode.error
            }
            print(SHA256.hex(bytes))
        }
    }
}

private extension String {
    func leftPadded(to width: Int) -> String { count >= width ? self : String(repeating: "0", count: width - count) + self }
}
