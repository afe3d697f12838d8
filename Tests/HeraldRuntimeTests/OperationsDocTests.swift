// docs/operations.md names every flag of the commands an operator runs, and the systemd unit it describes is one systemd accepts.
import Foundation
import Glibc
import HeraldTestSupport
import Testing

@Suite struct OperationsDocTests {
    static let root = DeploymentFilesTests.packageRoot

    /// The `--flags` a command's help lists (hidden ones are not listed).
    static func flags(_ command: [String]) throws -> Set<String> {
        let help = try HeraldCommandTests.herald(command + ["--help"])
        var flags: Set<String> = []
        for word in (help.stdout + help.stderr).split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "," || $0 == "\t" })
        where word.hasPrefix("--") && word.count > 2 {
            flags.insert("--" + String(word.dropFirst(2).prefix(while: { $0.isLetter || $0.isNumber || $0 == "-" })))
        }
        flags.remove("--")
        flags.remove("--help")
        flags.remove("--version")
        return flags
    }

    @Test(arguments: [["serve"], ["tail"], ["health"], ["replay"], ["import"], ["pending"], ["explain"], ["state"]])
    func operationsGuideNamesEveryFlag(command: [String]) throws {
        let doc = try String(contentsOfFile: Self.root + "/docs/operations.md", encoding: .utf8)
        let flags = try Self.flags(command)
        #expect(!flags.isEmpty, "herald \(command.joined(separator: " ")) --help lists flags")
        for flag in flags { #expect(doc.contains("`\(flag)"), "docs/operations.md names \(flag) of herald \(command.joined(separator: " "))") }
    }

    static let systemdAnalyze = PrometheusScrapeTests.onPath("systemd-analyze")

    /// deploy/systemd/herald.service, pointed at the built binary, passes `systemd-analyze verify`.
    @Test(.enabled(if: systemdAnalyze != nil, "systemd-analyze is not installed (Debian's systemd package)"))
    func theSystemdUnitVerifies() throws {
        let unit = try String(contentsOfFile: Self.root + "/deploy/systemd/herald.service", encoding: .utf8)
        #expect(unit.contains("ExecStart=/usr/local/bin/herald serve"))
        #expect(unit.contains("TimeoutStopSec=") && unit.contains("LimitNOFILE=") && unit.contains("ExecReload=/bin/kill -HUP $MAINPID"))
        let dir = FileManager.default.temporaryDirectory.path + "/herald-systemd-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/herald.service"
        try unit.replacingOccurrences(of: "/usr/local/bin/herald", with: try ServeProcess.findBinary())
            .write(toFile: path, atomically: true, encoding: .utf8)
        let verify = try DeploymentFilesTests.run(Self.systemdAnalyze!, ["verify", path])
        #expect(verify.status == 0, "systemd-analyze verify: \(verify.stdout)\(verify.stderr)")
    }
}
