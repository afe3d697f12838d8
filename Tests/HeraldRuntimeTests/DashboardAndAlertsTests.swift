// deploy/grafana/herald.json and deploy/prometheus/alerts.yml: valid, and every expression names a metric Herald exports.
import Foundation
import Glibc
import HeraldWireTesting
import HeraldCore
import HeraldTestSupport
import Testing

@Suite struct DashboardAndAlertsTests {
    static let root = DeploymentFilesTests.packageRoot

    /// Metric names an expression refers to: Herald's, the process's and Prometheus' own `up`.
    static func metricNames(_ expression: String) -> Set<String> {
        var names: Set<String> = []
        var word = ""
        for ch in expression + " " {
            if ch.isLetter || ch.isNumber || ch == "_" || ch == ":" { word.append(ch); continue }
            if word.hasPrefix("herald_") || word.hasPrefix("process_") || word == "up" { names.insert(word) }
            word = ""
        }
        return names
    }

    /// Every metric family a running `herald serve --http` exposes once each kind of series exists
    /// (a request, an error, a subscribed consumer, a snapshot), from its `# TYPE` lines; a
    /// histogram's `_bucket`, `_sum` and `_count` series too.
    static func exportedNames() throws -> Set<String> {
        let url = try TestPostgres.freshDatabase()
        let log = FileManager.default.temporaryDirectory.path + "/herald-dashboard-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).log"
        defer { try? FileManager.default.removeItem(atPath: log) }
        let httpPort = LocalClusterPort.free()
        let serve = try ServeProcess(databaseURL: url, logPath: log, extraArguments: ["--http", "127.0.0.1:\(httpPort)", "--snapshot-every", "1"])
        try serve.start()
        defer { serve.terminate() }
        let client = try WireClient(port: serve.port)
        #expect(try client.request(#"{"op":"hello","token":"x"}"#)["ok"] == true)
        #expect(try client.request(#"{"op":"submit","app":"com.example.mail","user":"u1","id":"n1","title":"Hi"}"#)["ok"] == true)
        #expect(try client.request(#"{"op":"submit","app":"com.example.mail","user":"u1","title":"no id"}"#)["ok"] == false)
        #expect(try client.request(#"{"op":"subscribe","consumer":"dashboard","from":"committed"}"#)["ok"] == true)
        var text = ""
        for _ in 0..<100 {
            text = try HTTPProbe.get(host: "127.0.0.1", port: httpPort, path: "/metrics").body
            if text.contains("# TYPE herald_snapshot_age_seconds ") { break }
            usleep(100_000)
        }
        #expect(text.contains("# TYPE herald_snapshot_age_seconds "), "a snapshot within 10 s")
        var names: Set<String> = ["up"]
        for line in text.split(separator: "\n") where line.hasPrefix("# TYPE ") {
            let parts = line.split(separator: " ")
            guard parts.count == 4 else { continue }
            let name = String(parts[2])
            names.insert(name)
            if parts[3] == "histogram" { for suffix in ["_bucket", "_sum", "_count"] { names.insert(name + suffix) } }
        }
        client.close()
        return names
    }

    /// Every `expr` of the dashboard's panels and the query of its variables.
    static func dashboardExpressions() throws -> [String] {
        let data = try Data(contentsOf: URL(fileURLWithPath: root + "/deploy/grafana/herald.json"))
        let json = try JSONValue.parse(Array(data))
        var expressions: [String] = []
        for panel in json["panels"]?.arrayValue ?? [] {
            for target in panel["targets"]?.arrayValue ?? [] { expressions += [target["expr"]?.stringValue].compactMap { $0 } }
        }
        for variable in json["templating"]?["list"]?.arrayValue ?? [] {
            expressions += [variable["definition"]?.stringValue].compactMap { $0 }
        }
        return expressions
    }

    /// The `expr:` values of the alert rules (each on one line).
    static func alertExpressions() throws -> [String] {
        try String(contentsOfFile: root + "/deploy/prometheus/alerts.yml", encoding: .utf8).split(separator: "\n")
            .compactMap { line in
                let trimmed = line.trimmingCharacters(in: .whitespaces)
                return trimmed.hasPrefix("expr:") ? String(trimmed.dropFirst(5)).trimmingCharacters(in: .whitespaces) : nil
            }
    }

    @Test func dashboardAndAlertsNameOnlyMetricsHeraldExports() throws {
        let dashboard = try Self.dashboardExpressions()
        let alerts = try Self.alertExpressions()
        #expect(dashboard.count >= 15, "a panel for each thing an operator watches")
        #expect(alerts.count >= 10)
        let exported = try Self.exportedNames()
        for expression in dashboard + alerts {
            let names = Self.metricNames(expression)
            #expect(!names.isEmpty, "names a metric: \(expression)")
            for name in names { #expect(exported.contains(name), "\(name) (in \(expression)) is not exported by herald serve --http") }
        }
        // The dashboard shows each family an operator needs.
        let shown = dashboard.reduce(into: Set<String>()) { $0.formUnion(Self.metricNames($1)) }
        for needed in ["herald_requests_total", "herald_request_errors_total", "herald_request_duration_seconds_bucket",
                       "herald_commit_batch_rows_bucket", "herald_commit_duration_seconds_bucket", "herald_events_appended_total",
                       "herald_deliveries_appended_total", "herald_timers_pending", "herald_timer_wheel_lag_seconds",
                       "herald_consumer_lag_deliveries", "herald_connections", "herald_store_reconnects_total", "herald_snapshot_age_seconds"] {
            #expect(shown.contains(needed), "the dashboard shows \(needed)")
        }
    }

    @Test(.enabled(if: PrometheusScrapeTests.promtool != nil, Comment(rawValue: PrometheusScrapeTests.missing)))
    func theAlertRulesPassPromtool() throws {
        let check = try PrometheusScrapeTests.promtool(["check", "rules", Self.root + "/deploy/prometheus/alerts.yml"])
        #expect(check.status == 0, "promtool check rules: \(check.stdout)\(check.stderr)")
        #expect(check.stdout.contains("SUCCESS"), "\(check.stdout)")
    }
}
