// Who owns each partition, as a cluster member last read it from the leases (SPEC §9).

/// A partition's owner: where requests for it go.
public struct Owner: Equatable, Sendable {
    /// The owning instance's name.
    public var instance: String
    /// Where clients reach the owner (its advertised address).
    public var address: String
    public var epoch: Int64
    public init(instance: String, address: String, epoch: Int64) {
        self.instance = instance
        self.address = address
        self.epoch = epoch
    }
}

/// Each partition's live owner, if any (a partition between owners has none).
public struct Owners: Equatable, Sendable {
    public private(set) var byPartition: [Owner?]

    public init(partitions: Int) { byPartition = Array(repeating: nil, count: partitions) }

    public subscript(partition: Int) -> Owner? {
        get { partition >= 0 && partition < byPartition.count ? byPartition[partition] : nil }
        set { if partition >= 0 && partition < byPartition.count { byPartition[partition] = newValue } }
    }

    public var count: Int { byPartition.count }

    /// `hello`'s `routes`: each partition with its owner's address and epoch (null while it has none).
    public var routes: JSONValue {
        .array(byPartition.enumerated().map { p, owner in
            .object(["partition": .int(Int64(p)), "address": owner.map { .string($0.address) } ?? .null,
                     "epoch": owner.map { .int($0.epoch) } ?? .null])
        })
    }
}
