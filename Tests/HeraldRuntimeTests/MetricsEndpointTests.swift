// `serve --http`: /metrics in Prometheus' text format with the series an operator watches, /healthz, /readyz, and `herald health --http`.
import Foundation
import Glibc
import HeraldWireTesting
import HeraldCore
@testable import HeraldRuntime
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct MetricsEndpointTests {
    /// The value of the sample `series` (name and labels exactly as exposed) in a scrape, or nil.
    static func sample(_ text: String, _ series: String) -> Double? {
        for line in text.split(separator: "\n") where line.hasPrefix(series + " ") {
            return Double(line.dropFirst(series.count + 1))
        }
        return nil
    }

    static func get(_ port: Int, _ path: String) throws -> (status: Int, body: String) {
        try HTTPProbe.get(host: "127.0.0.1", port: port, path: path)
    }

    /// A real `herald serve --http`: after requests of several kinds, a scrape counts them by op
    /// and code, times them, shows the connections by role and a consumer's lag, and the
    /// endpoints and `herald health --http` answer as documented.
    @Test func metricsCountRequestsErrorsConnectionsAndLagOfARealServe() throws {
        let url = try TestPostgres.freshDatabase()
        let log = FileManager.default.temporaryDirectory.path + "/herald-metrics-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).log"
        defer { try? FileManager.default.removeItem(atPath: log) }
        let httpPort = LocalClusterPort.free()
        let serve = try ServeProcess(databaseURL: url, logPath: log, extraArguments: ["--http", "127.0.0.1:\(httpPort)"])
        try serve.start()
        defer { serve.terminate() }

        #expect(try Self.get(httpPort, "/healthz").status == 200)
        let ready = try Self.get(httpPort, "/readyz")
        #expect(ready.status == 200 && ready.body == "ready\n", "\(ready)")
        #expect(try Self.get(httpPort, "/nothing").status == 404)

        let producer = try WireClient(port: serve.port)
        #expect(try producer.request(#"{"op":"hello","token":"x"}"#)["ok"] == true)
        #expect(try producer.request(#"{"op":"registerApp","app":"com.example.mail","entitlements":[]}"#)["ok"] == true)
        for i in 0..<20 {
            #expect(try producer.request(#"{"op":"submit","app":"com.example.mail","user":"u\#(i % 3)","id":"n\#(i)","title":"Hi"}"#)["ok"] == true)
        }
        #expect(try producer.request(#"{"op":"submit","app":"com.example.mail","user":"u1","title":"no id"}"#)["ok"] == false)
        let consumer = try WireClient(port: serve.port)
        #expect(try consumer.request(#"{"op":"hello","token":"x"}"#)["ok"] == true)
        // Subscribed at the head: it has been sent nothing, so its lag is 0 until more is delivered.
        #expect(try consumer.request(#"{"op":"subscribe","consumer":"audit","from":"committed"}"#)["ok"] == true)

        let scrape = try Self.get(httpPort, "/metrics")
        #expect(scrape.status == 200)
        let text = scrape.body
        #expect(Self.sample(text, #"herald_requests_total{op="submit"}"#) == 21, "\(text)")
        #expect(Self.sample(text, #"herald_requests_total{op="registerApp"}"#) == 1)
        #expect(Self.sample(text, #"herald_request_errors_total{op="submit",code="missing_field"}"#) == 1)
        #expect(Self.sample(text, #"herald_request_duration_seconds_count{op="submit"}"#) == 21)
        #expect(Self.sample(text, #"herald_events_appended_total"#) == 21)
        #expect((Self.sample(text, #"herald_deliveries_appended_total"#) ?? 0) >= 20)
        #expect((Self.sample(text, #"herald_commit_batch_rows_count{writer="events"}"#) ?? 0) >= 1)
        #expect((Self.sample(text, #"herald_commit_duration_seconds_count{writer="events"}"#) ?? 0) >= 1)
        // Dev mode grants every role: both connections count in each.
        #expect(Self.sample(text, #"herald_connections{role="producer"}"#) == 2)
        #expect(Self.sample(text, #"herald_connections{role="consumer"}"#) == 2)
        #expect(Self.sample(text, #"herald_consumer_lag_deliveries{consumer="audit"}"#) != nil, "\(text)")
        #expect(Self.sample(text, #"herald_ready"#) == 1)
        #expect(Self.sample(text, #"herald_users"#) == 3)
        #expect(Self.sample(text, #"herald_partitions"#) == 1 && Self.sample(text, #"herald_partitions_owned"#) == 1)
        #expect((Self.sample(text, #"herald_lease_epoch{partition="0"}"#) ?? 0) >= 1, "\(text)")
        #expect((Self.sample(text, #"herald_lease_renewals_total"#) ?? 0) >= 1, "renewed at once on start")
        #expect(text.contains("# TYPE herald_request_duration_seconds histogram"))
        #expect(text.contains("# HELP herald_requests_total "))

        // herald health --http: the readiness probe as a container runs it.
        let healthy = try HeraldCommandTests.herald(["health", "--http", "127.0.0.1:\(httpPort)"])
        #expect(healthy.status == 0, "\(healthy)")
        #expect(healthy.stdout.contains("answered GET /readyz with 200"), "\(healthy)")
        consumer.close()
        producer.close()
    }

    /// A lost writer connection is counted, /readyz says not ready until it is back, and the
    /// reconnect is counted too.
    @Test func aLostPostgreSQLConnectionIsCountedAndReadinessComesBack() throws {
        let url = try TestPostgres.freshDatabase()
        let log = FileManager.default.temporaryDirectory.path + "/herald-metrics-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).log"
        defer { try? FileManager.default.removeItem(atPath: log) }
        let httpPort = LocalClusterPort.free()
        let serve = try ServeProcess(databaseURL: url, logPath: log, extraArguments: ["--http", "127.0.0.1:\(httpPort)"])
        try serve.start()
        defer { serve.terminate() }
        let client = try WireClient(port: serve.port)
        #expect(try client.request(#"{"op":"hello","token":"x"}"#)["ok"] == true)
        let pid = try client.request(#"{"op":"stats"}"#)["storeBackendPID"]?.intValue ?? 0
        #expect(pid > 0)
        let admin = try PGConnection.connect(url)
        _ = try admin.execute("SELECT pg_terminate_backend(\(pid))")
        var reconnected = false
        for _ in 0..<200 where !reconnected {
            let text = try Self.get(httpPort, "/metrics").body
            reconnected = Self.sample(text, #"herald_store_reconnects_total{writer="events"}"#) == 1
                && Self.sample(text, #"herald_store_disconnects_total{writer="events"}"#) == 1
            usleep(50_000)
        }
        #expect(reconnected, "the lost connection and its reconnect are counted")
        #expect(try Self.get(httpPort, "/readyz").status == 200)
        #expect(serve.tail(40).contains("warning lost PostgreSQL"), "the loss is a warning: \(serve.tail(40))")
    }

    /// /readyz says 503 once a stop has begun (goodbye sent), while /healthz still answers.
    @Test func readinessEndsWhenTheStopBegins() throws {
        let url = try TestPostgres.freshDatabase()
        var config = ServiceConfiguration(databaseURL: url)
        config.port = 0
        config.clock = .manual(start: Instant(rfc3339: "2026-03-27T07:00:00Z")!)
        config.handleSignals = false
        let service = HeraldService(configuration: config) { _ in }
        try service.start()
        let observability = ServiceObservability(service: service)
        try observability.start(host: "127.0.0.1", port: 0)
        #expect(observability.answer("/readyz").status == 200)
        service.beginShutdown()
        let answer = observability.answer("/readyz")
        #expect(answer.status == 503)
        #expect(String(decoding: answer.body, as: UTF8.self).contains("stopping"))
        #expect(observability.answer("/healthz").status == 200)
        #expect(Self.sample(String(decoding: observability.metricsText(), as: UTF8.self), "herald_ready") == 0)
        service.run()
        observability.stop()
    }

    @Test func healthOverHTTPFailsAgainstAClosedPort() throws {
        let outcome = try HeraldCommandTests.herald(["health", "--http", "127.0.0.1:\(LocalClusterPort.free())", "--timeout", "2"])
        #expect(outcome.status == 1, "\(outcome)")
        #expect(outcome.stderr.contains("unhealthy:") && outcome.stderr.contains("refused"), "\(outcome)")
    }

    /// The loop's plain-count histogram is written out as Prometheus' cumulative buckets.
    @Test func requestDurationsAreExposedAsCumulativeBuckets() {
        let metrics = RequestMetrics()
        metrics.timing = true
        #expect(metrics.durationExposition() == "", "nothing timed, no family")
        let now = RequestMetrics.nanoseconds()
        metrics.succeeded(.submit, startedAt: now)                  // ~0 s
        metrics.succeeded(.submit, startedAt: now - 3_000_000)      // ~3 ms
        metrics.succeeded(.submit, startedAt: now - 20_000_000_000) // 20 s: only +Inf
        let text = metrics.durationExposition()
        #expect(text.contains("# TYPE herald_request_duration_seconds histogram\n"))
        #expect(MetricsEndpointTests.sample(text, #"herald_request_duration_seconds_bucket{op="submit",le="0.0005"}"#) == 1)
        #expect(MetricsEndpointTests.sample(text, #"herald_request_duration_seconds_bucket{op="submit",le="0.005"}"#) == 2)
        #expect(MetricsEndpointTests.sample(text, #"herald_request_duration_seconds_bucket{op="submit",le="10.0"}"#) == 2)
        #expect(MetricsEndpointTests.sample(text, #"herald_request_duration_seconds_bucket{op="submit",le="+Inf"}"#) == 3)
        #expect(MetricsEndpointTests.sample(text, #"herald_request_duration_seconds_count{op="submit"}"#) == 3)
        #expect((MetricsEndpointTests.sample(text, #"herald_request_duration_seconds_sum{op="submit"}"#) ?? 0) >= 20.003)
        #expect(!text.contains(#"op="ack""#), "ops without replies are left out")
    }

    @Test func anErrorLinesCodeIsReadFromItsCanonicalPrefix() {
        let line = WireReply.error(rid: .int(3), RequestError(code: "missing_field", title: "t", detail: "d"))
        #expect(RequestMetrics.errorCode(line) == "missing_field")
        #expect(RequestMetrics.errorCode(WireReply.ok(rid: .int(3), ["seq": .int(1)])) == nil)
    }
}
