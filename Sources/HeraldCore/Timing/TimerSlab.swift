// The arena of timer nodes: value-type records, index links, a free list and generations.

/// One timer's record: 24 bytes, no references, so the slab is a flat array the CPU can stream.
@usableFromInline
struct TimerNode: Sendable {
    /// The exact deadline in milliseconds since the epoch (reported back when the timer fires).
    @usableFromInline var deadline: Int64
    /// The caller's opaque payload.
    @usableFromInline var payload: UInt64
    /// Odd while live, even while free; bumped on every allocation and release.
    @usableFromInline var generation: UInt32
    /// While live: the timer's position in its owner's index storage (the wheel's slot
    /// blocks). While free: the next free node, or `TimerSlab.none`.
    @usableFromInline var link: UInt32

    @inlinable
    init(deadline: Int64, payload: UInt64, generation: UInt32, link: UInt32) {
        self.deadline = deadline
        self.payload = payload
        self.generation = generation
        self.link = link
    }
}

/// A growable arena of `TimerNode`s with a LIFO free list. Released nodes are reused before
/// the array grows, so a steady schedule/fire/cancel mix allocates nothing.
@usableFromInline
struct TimerSlab: Sendable {
    /// "No node" in index links.
    @usableFromInline static let none: UInt32 = .max

    @usableFromInline var nodes: ContiguousArray<TimerNode> = []
    @usableFromInline var freeHead: UInt32 = TimerSlab.none
    @usableFromInline var liveCount: Int = 0

    @inlinable init() {}

    /// Takes a node (reusing a free one first) and returns its index and new odd generation.
    @inlinable @inline(__always)
    mutating func allocate(deadline: Int64, payload: UInt64) -> (index: UInt32, generation: UInt32) {
        liveCount &+= 1
        let index = freeHead
        if index != TimerSlab.none {
            let i = Int(index)
            freeHead = nodes[i].link
            let generation = nodes[i].generation &+ 1
            nodes[i] = TimerNode(deadline: deadline, payload: payload, generation: generation, link: 0)
            return (index, generation)
        }
        precondition(nodes.count < Int(TimerSlab.none), "TimingWheel: more than 2^32-1 timers")
        let newIndex = UInt32(truncatingIfNeeded: nodes.count)
        nodes.append(TimerNode(deadline: deadline, payload: payload, generation: 1, link: 0))
        return (newIndex, 1)
    }

    /// Returns a live node to the free list; its generation becomes even, voiding old handles.
    @inlinable @inline(__always)
    mutating func release(_ index: UInt32) {
        liveCount &-= 1
        let i = Int(index)
        nodes[i].generation &+= 1
        nodes[i].link = freeHead
        freeHead = index
    }

    /// Whether `handle` names a timer that is still scheduled.
    @inlinable @inline(__always)
    func isLive(_ handle: TimerHandle) -> Bool {
        let i = Int(handle.index)
        return i < nodes.count && nodes[i].generation == handle.generation && handle.generation & 1 == 1
    }

    @inlinable
    mutating func reserveCapacity(_ n: Int) {
        if n > nodes.capacity { nodes.reserveCapacity(n) }
    }

    /// Bytes held by the node array (its capacity, not just its live part).
    @inlinable var storageBytes: Int { nodes.capacity * MemoryLayout<TimerNode>.stride }
}
