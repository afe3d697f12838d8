// Judges what the members of one consumer group received and acknowledged (SPEC §9, consumers).

/// What a consumer group's members saw, judged against the deliveries stored:
/// - every cursor of every partition reached some member (nothing skipped);
/// - while the group did not change (`stable`), each partition reached one member only, in
///   rising cursor order;
/// - after a member left (`departed`), no other member received a cursor that the departed one
///   had acknowledged, with the ack confirmed (duplicates only after its last ack). Lines the
///   others read after it left may have been sent before (a handover between the others), so
///   acknowledgements of the members still there cannot be judged from a client's reading times.
public struct ConsumerGroupChecker: Sendable {
    public struct Member: Sendable {
        public var name: String
        /// Each delivery line as received.
        public var received: [(partition: Int, cursor: Int64, at: Double)] = []
        /// Each ack the server confirmed.
        public var confirmed: [(partition: Int, cursor: Int64, at: Double)] = []
        public init(name: String) { self.name = name }
    }

    public init() {}

    /// The faults found; empty when the group kept its promises. `heads` is each partition's
    /// newest stored delivery cursor; `departed` the index of the member that left.
    public func faults(_ members: [Member], heads: [Int: Int64], stable: Bool = false, departed: Int? = nil) -> [String] {
        var faults: [String] = []
        var receivers: [Int: [Int64: Set<Int>]] = [:]
        for (i, m) in members.enumerated() {
            var last: [Int: Int64] = [:]
            for r in m.received {
                if stable, let l = last[r.partition], r.cursor <= l {
                    faults.append("\(m.name): partition \(r.partition) went back from \(l) to \(r.cursor) in a stable group")
                }
                last[r.partition] = max(last[r.partition] ?? 0, r.cursor)
                receivers[r.partition, default: [:]][r.cursor, default: []].insert(i)
            }
        }
        for (p, head) in heads.sorted(by: { $0.key < $1.key }) where head > 0 {
            let got = receivers[p] ?? [:]
            let missing = (1...head).filter { got[$0] == nil }
            if !missing.isEmpty { faults.append("partition \(p): \(missing.count) cursor(s) reached no member (first \(missing[0]))") }
        }
        if stable {
            for (p, cursors) in receivers.sorted(by: { $0.key < $1.key }) {
                let shared = cursors.filter { $0.value.count > 1 }.keys.sorted()
                if let c = shared.first { faults.append("partition \(p): \(shared.count) cursor(s) reached several members of a stable group (first \(c))") }
            }
        }
        if let departed {
            let gone = members[departed]
            let acked = Dictionary(gone.confirmed.map { ($0.partition, $0.cursor) }, uniquingKeysWith: max)
            for (i, m) in members.enumerated() where i != departed {
                let again = m.received.filter { r in r.cursor <= (acked[r.partition] ?? 0) && gone.received.contains { $0.partition == r.partition && $0.cursor == r.cursor } }
                if let r = again.first {
                    faults.append("\(m.name) received \(again.count) line(s) \(gone.name) had acknowledged (first: partition \(r.partition) cursor \(r.cursor))")
                }
            }
        }
        return faults
    }
}
