// MembershipStateMachine, PartitionBalancer and ClusterSQL together on PostgreSQL, in real time: join, balance, die, leave.
import Foundation
import HeraldCore
import HeraldStore
import HeraldTestSupport
import Testing

/// A `herald serve` instance reduced to its membership: a blocking driver that performs the
/// machine's actions on its own connection and renews each served partition with its
/// `LeaseStateMachine` (starting a partition is instant here). It is the call sequence the
/// service follows, without the service.
final class BlockingMember {
    let name: String
    let address: String
    let ttl: Int64
    let conn: PGConnection
    var machine: MembershipStateMachine
    var leases: [Int: LeaseStateMachine] = [:]
    var nextTick: Int64 = 0
    var nextRenewal: Int64 = 0

    init(_ name: String, url: String, ttlMilliseconds: Int64) throws {
        self.name = name
        self.address = "\(name):7000"
        self.ttl = ttlMilliseconds
        self.conn = try PGConnection.connect(url)
        self.machine = MembershipStateMachine(instance: name, ttlMilliseconds: ttlMilliseconds)
    }

    static func now() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1_000 + Int64(ts.tv_nsec) / 1_000_000
    }

    func start() throws { try perform(machine.startRequested(now: Self.now())) }
    func stop() throws { try perform(machine.stopRequested()) }

    /// Runs what is due: the tick, and the renewals (every third of the TTL).
    func step() throws {
        let now = Self.now()
        if now >= nextTick, nextTick > 0 {
            nextTick = 0
            try perform(machine.tickDue(now: now))
        }
        if now >= nextRenewal {
            nextRenewal = now + max(ttl / 3, 1)
            for (p, var lease) in leases {
                guard case .renew(let epoch) = lease.renewalDue(now: now) else { continue }
                let renewed = try conn.execute(LeaseSQL.renew, [String(p), String(epoch), String(ttl), address]).rowCount == 1
                if renewed {
                    lease.renewed(sentAt: now)
                    leases[p] = lease
                } else {
                    _ = lease.renewalRefused()
                    leases[p] = nil
                    try perform(machine.partitionLost(partition: p))
                }
            }
        }
    }

    /// The one place the actions are performed; each outcome goes back to the machine at once.
    func perform(_ actions: [MembershipStateMachine.Action]) throws {
        for action in actions {
            switch action {
            case .heartbeat:
                let ok = (try? ClusterSQL.heartbeat(conn, instance: name, address: address, ttlMilliseconds: ttl)) != nil
                try perform(machine.heartbeatCompleted(ok: ok))
            case .readView:
                if let view = try? ClusterSQL.view(conn) {
                    try perform(machine.viewRead(view))
                } else {
                    try perform(machine.viewReadFailed())
                }
            case .take(let partition, let expectedEpoch):
                let epoch = try ClusterSQL.take(conn, partition: partition, instance: name, address: address,
                                                ttlMilliseconds: ttl, expectedEpoch: expectedEpoch)
                try perform(machine.takeCompleted(partition: partition, epoch: epoch))
            case .startServing(let partition, let epoch):
                var lease = LeaseStateMachine(ttlMilliseconds: ttl)
                lease.taken(epoch: epoch, sentAt: Self.now())
                leases[partition] = lease
                try perform(machine.partitionStarted(partition: partition))
            case .release(let partition, let epoch):
                _ = try conn.execute(LeaseSQL.release, [String(partition), String(epoch)])
            case .handOver(let partition):
                // Drained at once here; renewals stop before the release, which is the last word.
                if let epoch = leases.removeValue(forKey: partition)?.epoch {
                    _ = try conn.execute(LeaseSQL.release, [String(partition), String(epoch)])
                }
                try perform(machine.handOverCompleted(partition: partition))
            case .leave:
                try ClusterSQL.leave(conn, instance: name)
            case .armTick(let ms):
                nextTick = Self.now() + ms
            }
        }
    }
}

@Suite struct ClusterMembershipTests {
    /// Steps every member until `done` holds (every 10 ms), for at most `seconds`; the milliseconds it took.
    static func run(_ members: [BlockingMember], seconds: Double, until done: () throws -> Bool) throws -> Int64? {
        let start = BlockingMember.now()
        while BlockingMember.now() - start < Int64(seconds * 1_000) {
            for m in members { try m.step() }
            if try done() { return BlockingMember.now() - start }
            usleep(10_000)
        }
        return nil
    }

    /// Who holds a live lease on each partition, by the database.
    static func owners(_ conn: PGConnection) throws -> [String?] {
        let r = try conn.execute("SELECT CASE WHEN lease_expires >= now() THEN owner END FROM partitions ORDER BY partition")
        return (0..<r.rowCount).map { r.string($0, 0) }
    }

    static func balanced(_ conn: PGConnection, among names: Set<String>, _ members: [BlockingMember]) throws -> Bool {
        let owners = try Self.owners(conn)
        guard owners.allSatisfy({ $0.map(names.contains) ?? false }) else { return false }
        let counts = names.map { n in owners.filter { $0 == n }.count }
        let serving = members.filter { names.contains($0.name) }
        return counts.max()! - counts.min()! <= 1
            && serving.allSatisfy { m in m.machine.serving.keys.sorted() == owners.indices.filter { owners[$0] == m.name } }
    }

    /// Three instances share 16 partitions 6/5/5; when one stops being driven (dead), the other two
    /// take its partitions once its leases and heartbeat expire, and balance 8/8.
    @Test func threeInstancesBalanceAndTheSurvivorsTakeOverADeadOnesPartitions() throws {
        let url = try ClusterSQLTests.database(partitions: 16)
        let conn = try PGConnection.connect(url)
        defer { conn.close() }
        let ttl: Int64 = 900
        let members = try ["a", "b", "c"].map { try BlockingMember($0, url: url, ttlMilliseconds: ttl) }
        for m in members { try m.start() }
        let joined = try Self.run(members, seconds: 20) { try Self.balanced(conn, among: ["a", "b", "c"], members) }
        #expect(joined != nil, "\((try? Self.owners(conn)) ?? [])")
        #expect(members.map(\.machine.serving.count) == [6, 5, 5], "shares by name")

        let survivors = [members[0], members[2]]
        let killedAt = BlockingMember.now()
        let tookOver = try Self.run(survivors, seconds: 20) { try Self.balanced(conn, among: ["a", "c"], survivors) }
        #expect(tookOver != nil, "\((try? Self.owners(conn)) ?? [])")
        #expect(survivors.map(\.machine.serving.count) == [8, 8])
        print("Cluster on PostgreSQL (TTL \(ttl) ms): 3 instances balanced after \(joined ?? -1) ms; b's partitions taken over and balanced \(BlockingMember.now() - killedAt) ms after it stopped")
    }

    /// An instance that stops gracefully hands its partitions over at once: with a lease TTL of a
    /// minute, the newcomer holds all of them within seconds.
    @Test func aGracefulStopHandsEveryPartitionOverWithoutWaitingForTheTTL() throws {
        let url = try ClusterSQLTests.database(partitions: 16)
        let conn = try PGConnection.connect(url)
        defer { conn.close() }
        let old = try BlockingMember("old", url: url, ttlMilliseconds: 60_000)
        try old.start()
        #expect(old.machine.serving.count == 16, "alone: its first round takes everything")
        let new = try BlockingMember("new", url: url, ttlMilliseconds: 600)
        try new.start()
        try old.stop()
        #expect(old.machine.state == .left)
        let handedOver = try Self.run([new], seconds: 20) { try Self.balanced(conn, among: ["new"], [new]) }
        #expect(handedOver != nil, "\((try? Self.owners(conn)) ?? [])")
        #expect(try ClusterSQL.view(conn).liveInstances == ["new"])
    }
}
