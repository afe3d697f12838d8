// `herald-roundtrip`, the Swift client's shortest example, against a real `herald serve`.
import Foundation
import HeraldTestSupport
import Testing

@Suite struct RoundtripTests {
    static func roundtrip(_ environment: [String: String]) throws -> (status: Int32, stdout: String, stderr: String) {
        // This package's build of it (beside the test bundle's sources), else beside the herald binary.
        let root = ((#filePath as NSString).deletingLastPathComponent as NSString).deletingLastPathComponent
        let built = ["debug", "release"].map { ((root as NSString).deletingLastPathComponent as NSString).appendingPathComponent(".build/\($0)/herald-roundtrip") }
        let binary = try built.first { FileManager.default.isExecutableFile(atPath: $0) }
            ?? (try ServeProcess.findBinary() as NSString).deletingLastPathComponent + "/herald-roundtrip"
        let tag = "\(FileManager.default.temporaryDirectory.path)/herald-roundtrip-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        _ = FileManager.default.createFile(atPath: tag + ".out", contents: nil)
        _ = FileManager.default.createFile(atPath: tag + ".err", contents: nil)
        defer { try? FileManager.default.removeItem(atPath: tag + ".out"); try? FileManager.default.removeItem(atPath: tag + ".err") }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: binary)
        p.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        p.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: tag + ".out"))
        p.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: tag + ".err"))
        try p.run()
        p.waitUntilExit()
        return (p.terminationStatus, try String(contentsOfFile: tag + ".out", encoding: .utf8), try String(contentsOfFile: tag + ".err", encoding: .utf8))
    }

    /// It registers an app, authorizes a user, pipelines N submits and reads their N deliveries
    /// through a fresh consumer; its last line says so; a wrong token makes it fail with the code.
    @Test func theRoundTripPrintsItsCountsLastAndFailsWithTheError() throws {
        let server = try ClientTestServer()
        let ok = try Self.roundtrip(["HERALD_ADDR": "127.0.0.1:\(server.port)", "HERALD_TOKEN": ClientTestServer.adminToken, "N": "500"])
        #expect(ok.status == 0, "\(ok)")
        #expect(ok.stdout.split(separator: "\n").last == "roundtrip: 500 acked, 500 delivered", "\(ok)")
        let refused = try Self.roundtrip(["HERALD_ADDR": "127.0.0.1:\(server.port)", "HERALD_TOKEN": "wrong", "N": "5"])
        #expect(refused.status != 0 && refused.stderr.contains("invalid_token"), "\(refused)")
    }
}
