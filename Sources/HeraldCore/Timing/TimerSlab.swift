// The arena of timer nodes: 24-byte value records addressed by UInt32 indices, with generations.

/// One timer's record: 24 bytes, no references, so the slab is a flat array the CPU can stream.
@usableFromInline
struct TimerNode: Sendable {
    /// The exact deadline in milliseconds since the epoch (reported back when the timer fires).
    @usableFromInline var deadline: Int64
    /// The caller's opaque payload.
    @usableFromInline var payload: UInt64
    /// Odd while the timer is live. Even once it fired or was cancelled (its handle is then
    /// stale) and while the node is free. Bumped on every allocation and every death.
    @usableFromInline var generation: UInt32

    @inlinable
    init(deadline: Int64, payload: UInt64, generation: UInt32) {
        self.deadline = deadline
        self.payload = payload
        self.generation = generation
    }
}

/// The node arena. Free nodes are tracked in a bitmap (`FreeNodeBitmap`), not a linked free
/// list, so allocating never chases a link through a cold node and hands out the lowest
/// free index.
@usableFromInline
struct TimerSlab: Sendable {
    @usableFromInline var nodes: ContiguousArray<TimerNode> = []
    /// Live timers.
    @usableFromInline var liveCount: Int = 0
    /// Cancelled timers whose node still sits in a slot (reclaimed when the slot is next
    /// processed or by a compaction).
    @usableFromInline var cancelledCount: Int = 0
    /// Nodes that hold no timer and sit in no slot.
    @usableFromInline var free = FreeNodeBitmap()
    /// Nodes released during a slot pass, not yet in `free`: they are added in batches,
    /// sorted by index (see `FreeNodeBitmap.insertAll`). At most `pendingLimit` long.
    @usableFromInline var pendingFree: ContiguousArray<UInt32> = []
    @usableFromInline var pendingScratch: ContiguousArray<UInt32> = []
    @usableFromInline static let pendingLimit = 1 << 15

    /// Releases a node whose entry has left its slot (it fired or was cancelled).
    @inlinable @inline(__always)
    mutating func release(_ index: UInt32) {
        pendingFree.append(index)
        if pendingFree.count >= TimerSlab.pendingLimit { flushPendingFree() }
    }

    /// Moves the pending released nodes into `free`.
    @usableFromInline
    mutating func flushPendingFree() {
        free.insertAll(&pendingFree, scratch: &pendingScratch)
    }

    @inlinable init() {}

    /// Whether `handle` names a timer that is still scheduled.
    @inlinable @inline(__always)
    func isLive(_ handle: TimerHandle) -> Bool {
        let i = Int(handle.index)
        return i < nodes.count && nodes[i].generation == handle.generation && handle.generation & 1 == 1
    }

    @inlinable
    mutating func reserveCapacity(_ n: Int) {
        if n > nodes.capacity { nodes.reserveCapacity(n) }
        free.reserve(nodes: n)
    }

    /// Bytes held by the node array (its capacity, not just its live part).
    @inlinable var storageBytes: Int {
        nodes.capacity * MemoryLayout<TimerNode>.stride + free.storageBytes + (pendingFree.capacity + pendingScratch.capacity) * 4
    }
}
