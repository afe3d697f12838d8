// A real Prometheus scrapes `herald serve --http` and answers a query for a Herald series; promtool accepts /metrics.
import Foundation
import Glibc
import HeraldWireTesting
import HeraldCore
import HeraldTestSupport
import Testing

@Suite struct PrometheusScrapeTests {
    /// An executable on $PATH, or nil.
    static func onPath(_ name: String) -> String? {
        (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
            .map { "\($0)/\(name)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    static let prometheus = onPath("prometheus")
    static let promtool = onPath("promtool")
    static let missing = "prometheus or promtool is not installed: Debian's prometheus package (scripts/bootstrap installs it)"

    static func temporaryDirectory(_ name: String) throws -> String {
        let dir = FileManager.default.temporaryDirectory.path + "/herald-\(name)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }

    /// Runs `promtool` with `arguments`, `stdin` on its input; returns its status and its output.
    static func promtool(_ arguments: [String], stdin: String = "") throws -> HeraldCommandTests.Outcome {
        try DeploymentFilesTests.run(promtool!, arguments, stdin: stdin)
    }

    @Test(.enabled(if: prometheus != nil && promtool != nil, Comment(rawValue: missing)), .timeLimit(.minutes(1)))
    func prometheusScrapesServeAndAnswersAQueryForAHeraldSeries() throws {
        let url = try TestPostgres.freshDatabase()
        let dir = try Self.temporaryDirectory("prometheus")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let httpPort = LocalClusterPort.free(), prometheusPort = LocalClusterPort.free()
        let serve = try ServeProcess(databaseURL: url, logPath: dir + "/serve.log", extraArguments: ["--http", "127.0.0.1:\(httpPort)"])
        try serve.start()
        defer { serve.terminate() }
        let producer = try WireClient(port: serve.port)
        #expect(try producer.request(#"{"op":"hello","token":"x"}"#)["ok"] == true)
        #expect(try producer.request(#"{"op":"submit","app":"com.example.mail","user":"u1","id":"n1","title":"Hi"}"#)["ok"] == true)

        // promtool's lint of the exposition: types, HELP, names and units by Prometheus' conventions.
        let metrics = try HTTPProbe.get(host: "127.0.0.1", port: httpPort, path: "/metrics")
        #expect(metrics.status == 200)
        let lint = try Self.promtool(["check", "metrics"], stdin: metrics.body)
        #expect(lint.status == 0, "promtool check metrics: \(lint.stdout)\(lint.stderr)")

        try """
            global:
              scrape_interval: 1s
              evaluation_interval: 1s
            scrape_configs:
              - job_name: herald
                static_configs:
                  - targets: ["127.0.0.1:\(httpPort)"]
            """.write(toFile: dir + "/prometheus.yml", atomically: true, encoding: .utf8)
        let server = Process()
        server.executableURL = URL(fileURLWithPath: Self.prometheus!)
        server.arguments = ["--config.file=\(dir)/prometheus.yml", "--storage.tsdb.path=\(dir)/data",
                            "--web.listen-address=127.0.0.1:\(prometheusPort)", "--log.level=warn"]
        _ = FileManager.default.createFile(atPath: dir + "/prometheus.log", contents: nil)
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: dir + "/prometheus.log"))
        server.standardOutput = log
        server.standardError = log
        try server.run()
        defer {
            server.terminate()
            server.waitUntilExit()
        }

        // Within 20 s: Prometheus is up, has scraped serve, and a query returns Herald's series.
        var answer: JSONValue?
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if let r = try? HTTPProbe.get(host: "127.0.0.1", port: prometheusPort, path: "/api/v1/query?query=herald_requests_total"),
               r.status == 200, let json = try? JSONValue.parse(Array(r.body.utf8)),
               let results = json["data"]?["result"]?.arrayValue, !results.isEmpty {
                answer = json
                break
            }
            usleep(250_000)
        }
        let prometheusLog = (try? String(contentsOfFile: dir + "/prometheus.log", encoding: .utf8)) ?? ""
        #expect(answer != nil, "no herald_requests_total from Prometheus within 20 s; its log:\n\(prometheusLog.suffix(2000))")
        let series = answer?["data"]?["result"]?.arrayValue?.first
        #expect(series?["metric"]?["job"] == "herald")
        #expect(series?["metric"]?["op"] == "submit")
        #expect(series?["value"]?.arrayValue?.last == "1", "\(answer?.canonicalString ?? "")")
        // And Prometheus saw the target up.
        let up = try HTTPProbe.get(host: "127.0.0.1", port: prometheusPort, path: "/api/v1/query?query=up")
        #expect(up.body.contains(#""job":"herald""#) && up.body.contains(#""1"]"#), "\(up.body)")
        producer.close()
    }
}
