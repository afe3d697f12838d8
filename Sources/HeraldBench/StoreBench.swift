// `herald-bench store`: event appends with group commit beside raw COPY of the same rows.
import ArgumentParser
import Foundation
import HeraldCommandLine
import HeraldStore
import HeraldTestSupport

struct StoreBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "store",
        abstract: "Event appends with group commit (acked after COMMIT) beside raw COPY of the same rows.")

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var fresh: FreshDatabaseOption
    @Option(help: "Events to append.") var events = 200_000
    @Option(help: "Simulated producers.") var producers = 8
    @Option(help: "Outstanding appends per producer.") var window = 128
    @Option(help: "Most rows in one writer transaction.") var maxRows = 10_000
    @Flag(help: "Print JSON instead of a table.") var json = false

    func run() throws {
        try reportingErrors {
            let location = try database.resolve(fresh: fresh)
            defer { location.close() }
            // A scratch database, so the benchmark never touches real data.
            let url = try scratchDatabase(location, name: "herald_bench")
            var bench = StoreBenchmark()
            bench.events = events; bench.producers = producers; bench.window = window
            bench.limits.maxRowsPerTransaction = maxRows
            bench.progress = { Log.info($0) }
            let r = try bench.run(databaseURL: url)
            if json {
                print(#"{"groupCommitEventsPerSecond":\#(Int(r.groupCommitEventsPerSecond)),"copyRowsPerSecond":\#(Int(r.copyRowsPerSecond)),"ratio":\#(String(format: "%.2f", r.ratio)),"copyIndexedRowsPerSecond":\#(Int(r.copyIndexedRowsPerSecond)),"ratioIndexed":\#(String(format: "%.2f", r.groupCommitEventsPerSecond / r.copyIndexedRowsPerSecond)),"copyStringFormattedRowsPerSecond":\#(Int(r.copyStringFormattedRowsPerSecond)),"ratioStringFormatted":\#(String(format: "%.2f", r.groupCommitEventsPerSecond / r.copyStringFormattedRowsPerSecond)),"transactions":\#(r.transactions),"walSyncsPer1000":\#(String(format: "%.2f", r.walSyncsPerThousandEvents)),"walBytesPerEvent":\#(Int(r.walBytesPerEvent)),"roundTripsPerEvent":\#(String(format: "%.4f", r.roundTripsPerEvent)),"ackP50Ms":\#(String(format: "%.2f", r.ackLatencyP50Ms)),"ackP99Ms":\#(String(format: "%.2f", r.ackLatencyP99Ms))}"#)
            } else {
                print("store append, \(events) events of ~300 B, \(producers) producers × \(window) outstanding, by COPY")
                print("  group commit (acked after COMMIT)  \(Int(r.groupCommitEventsPerSecond)) events/s   "
                      + "\(r.transactions) transactions, \(Int(r.meanRowsPerTransaction)) rows each; "
                      + "ack p50 \(String(format: "%.1f", r.ackLatencyP50Ms)) ms, p99 \(String(format: "%.1f", r.ackLatencyP99Ms)) ms")
                print("  WAL: \(String(format: "%.2f", r.walSyncsPerThousandEvents)) fsyncs per 1,000 events, "
                      + "\(Int(r.walBytesPerEvent)) bytes per event; \(String(format: "%.4f", r.roundTripsPerEvent)) round trips per event")
                print("  baseline: one COPY, no indexes    \(Int(r.copyRowsPerSecond)) rows/s")
                print("  ratio                              \(String(format: "%.2f", r.ratio))×")
                print("  reference: COPY with the log's indexes (pkey + unique (app, id, user))  \(Int(r.copyIndexedRowsPerSecond)) rows/s "
                      + "(ratio \(String(format: "%.2f", r.groupCommitEventsPerSecond / r.copyIndexedRowsPerSecond))×)")
                print("  reference: COPY, String-formatted rows  \(Int(r.copyStringFormattedRowsPerSecond)) rows/s "
                      + "(ratio \(String(format: "%.2f", r.groupCommitEventsPerSecond / r.copyStringFormattedRowsPerSecond))×; the first baseline)")
            }
        }
    }
}

/// Drops and recreates a scratch database next to the resolved one, migrated (unless told not to); returns its URL.
func scratchDatabase(_ location: DatabaseLocation, name: String, migrate: Bool = true) throws -> String {
    let admin = try PGConnection.connect(location.url)
    try admin.execute("SET client_min_messages = warning")
    try admin.execute("DROP DATABASE IF EXISTS \(name)")
    try admin.execute("CREATE DATABASE \(name)")
    let db = try admin.execute("SELECT current_database()").string(0, 0) ?? "postgres"
    admin.close()
    let url = location.url.replacingOccurrences(of: "dbname=\(db)", with: "dbname=\(name)")
    guard url != location.url else {
        throw StoreError.configuration("benchmarks need a key=value connection string with dbname= (or no --database-url)")
    }
    if migrate { try Migrator.migrate(PGConnection.connect(url)) }
    return url
}
