// One request on its way through a router to its partition's owner: sent, parked for the next owner, answered or refused.

/// The path of one request through a cluster member's router (SPEC §9, routing; decision 0041),
/// without I/O: the router looks up where the partition is served, reports what happened, and
/// carries out the returned action.
///
/// Requests come from two kinds of sender. A **client** of this router may be sent wherever the
/// partition's owner is (this member's service of it, or another instance), and waits here for
/// an owner while it has none. A **peer** — another instance's router, sending a request for a
/// partition it believes this instance owns (`"route":{"partition":p}`) — is served by this
/// instance's own service of the partition or refused with `not_owner`, and its sender re-routes
/// it. A peer's request is never parked here and never sent on to another instance: each link
/// between two routers answers in request order, so a router that sent a peer's request on to
/// the other router would wait on a link whose own head may be waiting on it (two members
/// handing partitions back and forth after a pause deadlocked both links so, for good).
public struct ForwardedRequest: Sendable, Equatable {
    public enum Origin: Sendable, Equatable {
        /// A client of this router.
        case client
        /// Another instance's router, for one partition (`"route":{"partition":p}`).
        case peer
    }

    /// Where the router can send the partition's requests now.
    public enum Owner: Sendable, Equatable {
        /// This member's service of the partition, on a link that still takes requests.
        case localService
        /// Another instance (by the leases as the member last read them).
        case otherInstance
        /// No owner is known (being taken over), or this member's own service is going away.
        case unknown
    }

    public enum State: Sendable, Equatable {
        case new
        case sent(Owner)
        /// Waiting for the partition to have an owner the router can reach.
        case parked
        case finished
    }

    public enum Action: Sendable, Equatable {
        /// Write the request on the link to `owner` (`.localService` or `.otherInstance`).
        case send(Owner)
        /// Keep it until the leases name an owner, then look the owner up again.
        case park
        /// Hand the owner's answer to the sender as it is.
        case relay
        /// Answer `not_owner`: nothing was stored; the sender (a peer's router) re-routes it.
        case refuseNotOwner
        /// Answer `partition_unavailable`: no owner for `waited` milliseconds; nothing was stored.
        case refuseUnavailable(waited: Int64)
    }

    public let origin: Origin
    public let partition: Int
    /// How long a client's request may wait for an owner before it is refused.
    public let parkLimitMilliseconds: Int64
    /// When the request began waiting for an owner (its arrival, or the loss of the link it was on).
    public private(set) var since: Int64
    public private(set) var state: State = .new

    public init(origin: Origin, partition: Int, now: Int64, parkLimitMilliseconds: Int64) {
        self.origin = origin
        self.partition = partition
        self.since = now
        self.parkLimitMilliseconds = parkLimitMilliseconds
    }

    /// The router looked up where the partition is served: for a new request, or a parked one
    /// when the owners changed or the park timer fired.
    public mutating func ownerLookedUp(_ owner: Owner, now: Int64) -> Action {
        switch (origin, owner) {
        case (.peer, .localService), (.client, .localService), (.client, .otherInstance):
            state = .sent(owner)
            return .send(owner)
        case (.peer, _):
            state = .finished
            return .refuseNotOwner
        case (.client, .unknown):
            if now - since >= parkLimitMilliseconds {
                state = .finished
                return .refuseUnavailable(waited: now - since)
            }
            state = .parked
            return .park
        }
    }

    /// The owner answered; `notOwner`: it refused with `not_owner` (it lost the partition
    /// meanwhile, or never had it), storing nothing.
    public mutating func answerReceived(notOwner: Bool, now: Int64) -> Action {
        if notOwner, origin == .client, now - since < parkLimitMilliseconds {
            state = .parked
            return .park
        }
        state = .finished
        return .relay
    }

    /// The link the request was written on ended before its answer came (the owner stopped,
    /// was killed, or said goodbye): nothing is known to be stored, and idempotency makes a
    /// second send safe. A client's request waits anew for the partition's owner; a peer's is
    /// refused, and its sender re-routes it.
    public mutating func linkLost(now: Int64) -> Action {
        switch origin {
        case .client:
            since = now
            state = .parked
            return .park
        case .peer:
            state = .finished
            return .refuseNotOwner
        }
    }
}
