// The partition this instance serves: taken at start-up, renewed on the loop, given up at a stop.
import Glibc
import HeraldCore
import HeraldStore

extension HeraldService {
    /// This instance's name in the leases.
    var instanceName: String { configuration.instanceName ?? "\(Self.hostName):\(configuration.port)" }

    /// The machine's host name (`gethostname`), "localhost" when it has none.
    static var hostName: String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count) == 0 else { return "localhost" }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return name.isEmpty ? "localhost" : name
    }

    /// Where clients reach this instance.
    var advertisedAddress: String { configuration.advertise ?? "\(configuration.host):\(listener?.port ?? configuration.port)" }

    /// Reads P and takes the lease of the partition this service serves, before anything is
    /// restored or appended: its epoch fences every append the writers make (`AppendScope`). A
    /// cluster member took the lease before starting the service (`configuration.leaseEpoch`); the
    /// single-instance `herald serve` takes it whoever held it (the instance lock keeps it alone).
    func takePartitions(_ conn: PGConnection) throws {
        partitioning = try EventReader.partitioning(conn)
        guard partition < partitioning.count else {
            throw ServiceError.configuration("partition \(partition) is not one of this database's \(partitioning.count)")
        }
        let epoch: Int64
        if let taken = configuration.leaseEpoch {
            epoch = taken
        } else {
            guard partitioning.count == 1 else {
                throw ServiceError.configuration("this database has \(partitioning.count) partitions: serve it as a cluster member "
                    + "(herald serve --instance NAME), which takes its share of the partitions and forwards the rest.")
            }
            epoch = try LeaseSQL.takeOver(conn, partition: partition, instance: instanceName, address: advertisedAddress,
                                          ttlMilliseconds: lease.ttlMilliseconds)
        }
        lease.taken(epoch: epoch, sentAt: ClientConnection.monotonicMilliseconds())
        let scope = AppendScope(partition: Int32(partition), epoch: epoch)
        for link in [store] + deliveryStores { link.scope = scope }
        log("serving partition \(partition) of \(partitioning.count) as \(instanceName) at epoch \(epoch)")
    }

    /// What `hello` tells of the deployment (SPEC §9).
    func topology() -> [String: JSONValue] {
        let address = advertisedAddress
        return [
            "instance": .string(instanceName),
            "partitions": .int(Int64(partitioning.count)),
            "hash": .string(Partitioning.hashName),
            "routes": .array(partitioning.all.map { p in
                .object(["partition": .int(Int64(p)), "address": .string(address), "epoch": .int(lease.epoch ?? 0)])
            }),
        ]
    }

    /// Renews at once (publishing the bound address), then every third of the TTL.
    func startLeaseRenewals() {
        leaseTimer = loop.timer { [unretained] in unretained.object?.leaseTick() }
        leaseTick()
    }

    private func leaseTick() {
        defer { if lifecycle.isServing { leaseTimer?.arm(afterMilliseconds: lease.renewEveryMilliseconds) } }
        let sentAt = ClientConnection.monotonicMilliseconds()
        switch lease.renewalDue(now: sentAt) {
        case .none:
            return
        case .stopServing(let epoch):
            leaseLost(epoch: epoch, why: "another instance took it over")
        case .renew(let epoch):
            leaseConnection.query(LeaseSQL.renew, [String(partition), String(epoch), String(lease.ttlMilliseconds), advertisedAddress]) { [unretained] result in
                guard let self = unretained.object else { return }
                switch result {
                case .success(let r) where r.rowCount == 1:
                    self.lease.renewed(sentAt: sentAt)
                    self.leaseRenewals += 1
                case .success:
                    if case .stopServing(let epoch) = self.lease.renewalRefused() {
                        self.leaseLost(epoch: epoch, why: "another instance took it over")
                    }
                case .failure(let error):
                    self.lease.renewalFailed()
                    self.leaseRenewalFailures += 1
                    self.log("could not renew the lease of partition \(self.partition): \(error)")
                }
            }
        }
    }

    /// A graceful stop gives the partition up at once (everything acknowledged is committed by
    /// now), so that another instance takes it without waiting for the lease to expire. Blocking,
    /// bounded by libpq's connect timeout: the last step of a stop.
    func releaseLease() {
        guard let epoch = lease.epoch else { return }
        lease.released()
        do {
            let conn = try PGConnection.connect(configuration.databaseURL)
            defer { conn.close() }
            try conn.execute(LeaseSQL.release, [String(partition), String(epoch)])
        } catch {
            log("could not release partition \(partition) (\(error)); another instance takes it when the lease expires")
        }
    }

    /// The partition is no longer ours: the writers' epoch check refuses every append from now
    /// on, so this instance stops (a graceful stop: goodbye to every connection).
    func leaseLost(epoch: Int64, why: String) {
        fencedOut = true
        log("lost partition \(partition) (epoch \(epoch)): \(why); stopping")
        beginShutdown()
    }
}
