// `herald status`: the deployment as the database sees it — partitions, their owners and leases, consumer lag.
import ArgumentParser
import HeraldCommandLine
import HeraldCore
import HeraldStore

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the partitions with their owner, epoch, lease and heads, the instances, and every consumer's lag (from the database).")

    @OptionGroup var database: DatabaseOptions
    @Flag(help: "One JSON object instead of tables.") var json = false

    func run() throws {
        try reportingErrors {
            let location = try database.resolve()
            defer { location.close() }
            let conn = try PGConnection.connect(location.url)
            let partitioning = try EventReader.partitioning(conn)
            let owners = try conn.execute("""
                SELECT partition, owner, address, epoch, to_char(lease_expires AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
                       coalesce(lease_valid, false), events, deliveries
                FROM herald_partition_owners ORDER BY partition
                """)
            let lag = try conn.execute("SELECT consumer, partition, acked, head, lag FROM herald_consumer_lag ORDER BY consumer, partition")
            var partitions: [JSONValue] = []
            var instances: [String: (address: String, partitions: [Int64], valid: Bool)] = [:]
            for i in 0..<owners.rowCount {
                let p = owners.int64(i, 0) ?? 0
                let owner = owners.string(i, 1)
                let valid = owners.string(i, 5) == "t"
                partitions.append(.object([
                    "partition": .int(p), "owner": owner.map(JSONValue.string) ?? .null,
                    "address": owners.string(i, 2).map(JSONValue.string) ?? .null, "epoch": .int(owners.int64(i, 3) ?? 0),
                    "leaseExpires": owners.string(i, 4).map(JSONValue.string) ?? .null, "leaseValid": .bool(valid),
                    "events": .int(owners.int64(i, 6) ?? 0), "deliveries": .int(owners.int64(i, 7) ?? 0),
                ]))
                if let owner {
                    var entry = instances[owner] ?? (address: owners.string(i, 2) ?? "", partitions: [], valid: false)
                    entry.partitions.append(p)
                    entry.valid = entry.valid || valid
                    instances[owner] = entry
                }
            }
            let consumers: [JSONValue] = (0..<lag.rowCount).map { i in
                .object(["consumer": .string(lag.string(i, 0) ?? ""), "partition": .int(lag.int64(i, 1) ?? 0),
                         "acked": .int(lag.int64(i, 2) ?? 0), "head": .int(lag.int64(i, 3) ?? 0), "lag": .int(lag.int64(i, 4) ?? 0)])
            }
            if json {
                print(JSONValue.object([
                    "partitions": .int(Int64(partitioning.count)), "hash": .string(Partitioning.hashName),
                    "owners": .array(partitions),
                    "instances": .array(instances.keys.sorted().map { name in
                        let e = instances[name]!
                        return .object(["instance": .string(name), "address": .string(e.address), "leaseValid": .bool(e.valid),
                                        "partitions": .array(e.partitions.map { .int($0) })])
                    }),
                    "consumers": .array(consumers),
                ]).canonicalString)
                return
            }
            print("partitions: \(partitioning.count) (\(Partitioning.hashName))")
            print("instances:")
            if instances.isEmpty { print("  none has served this database") }
            for name in instances.keys.sorted() {
                let e = instances[name]!
                print("  \(name) at \(e.address): \(e.partitions.count) partition(s), lease \(e.valid ? "valid" : "expired")")
            }
            print("partition  owner  epoch  lease  events  deliveries")
            for p in partitions {
                print("  \(p["partition"]!.intValue!)  \(p["owner"]?.stringValue ?? "-")  \(p["epoch"]!.intValue!)  "
                      + "\(p["leaseValid"] == true ? "valid until \(p["leaseExpires"]?.stringValue ?? "?")" : "expired")  "
                      + "\(p["events"]!.intValue!)  \(p["deliveries"]!.intValue!)")
            }
            print("consumers:")
            if consumers.isEmpty { print("  none") }
            for c in consumers {
                print("  \(c["consumer"]!.stringValue!) partition \(c["partition"]!.intValue!): acked \(c["acked"]!.intValue!) of \(c["head"]!.intValue!), lag \(c["lag"]!.intValue!)")
            }
        }
    }
}
