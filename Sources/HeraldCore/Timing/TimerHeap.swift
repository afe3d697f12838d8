// Reference model: an indexed binary min-heap with the TimingWheel API (test oracle, baseline).

/// A binary min-heap of timers keyed by (deadline, payload), with a position index per node
/// so `cancel` removes from the middle in O(log n). Same API and same firing rule as
/// `TimingWheel` (deadline order, ties by ascending payload, never early, time only moves
/// forward), but O(log n) schedule, cancel and fire. Used as the oracle of the wheel's
/// differential tests and as the baseline of its benchmark.
public struct TimerHeap: Sendable {
    @usableFromInline
    struct Entry: Sendable {
        @usableFromInline var deadline: Int64
        @usableFromInline var payload: UInt64
        @usableFromInline var node: UInt32

        @inlinable init(deadline: Int64, payload: UInt64, node: UInt32) {
            self.deadline = deadline
            self.payload = payload
            self.node = node
        }

        @inlinable @inline(__always)
        static func precedes(_ a: Entry, _ b: Entry) -> Bool {
            if a.deadline != b.deadline { return a.deadline < b.deadline }
            if a.payload != b.payload { return a.payload < b.payload }
            return a.node < b.node
        }
    }

    @usableFromInline
    struct Node: Sendable {
        /// Odd while live, even while free (as in `TimerSlab`).
        @usableFromInline var generation: UInt32
        /// While live: index in `heap`. While free: next free node.
        @usableFromInline var link: UInt32

        @inlinable init(generation: UInt32, link: UInt32) {
            self.generation = generation
            self.link = link
        }
    }

    @usableFromInline static let none: UInt32 = .max

    @usableFromInline var heap: ContiguousArray<Entry> = []
    @usableFromInline var nodes: ContiguousArray<Node> = []
    @usableFromInline var freeHead: UInt32 = TimerHeap.none
    @usableFromInline var nowMilliseconds: Int64

    /// Creates an empty heap whose time is `start`. The tick is accepted for API parity
    /// with `TimingWheel`; the heap is exact to the millisecond whatever it is.
    public init(start: Instant, tickMilliseconds: Int64 = 1) {
        precondition(tickMilliseconds >= 1, "TimerHeap: tick must be at least 1 ms")
        nowMilliseconds = start.millisecondsSinceEpoch
    }

    /// The number of live timers.
    public var count: Int { heap.count }

    /// The instant the heap was last advanced to (or its start).
    public var now: Instant { Instant(millisecondsSinceEpoch: nowMilliseconds) }

    /// Schedules a timer; a deadline at or before the current time fires on the next advance.
    @inlinable @discardableResult
    public mutating func schedule(at deadline: Instant, payload: UInt64) -> TimerHandle {
        let node = allocateNode()
        let position = heap.count
        heap.append(Entry(deadline: deadline.millisecondsSinceEpoch, payload: payload, node: node))
        nodes[Int(node)].link = UInt32(truncatingIfNeeded: position)
        siftUp(position)
        return TimerHandle(index: node, generation: nodes[Int(node)].generation)
    }

    /// Cancels a timer; `false` if it already fired, was cancelled, or the handle is stale.
    @inlinable @discardableResult
    public mutating func cancel(_ handle: TimerHandle) -> Bool {
        let i = Int(handle.index)
        guard i < nodes.count, nodes[i].generation == handle.generation, handle.generation & 1 == 1 else {
            return false
        }
        removeEntry(at: Int(nodes[i].link))
        releaseNode(handle.index)
        return true
    }

    /// Fires every timer with deadline <= `now` in (deadline, payload) order.
    public mutating func advance(to now: Instant, _ body: (Instant, UInt64) -> Void) {
        let nowMs = Swift.max(now.millisecondsSinceEpoch, nowMilliseconds)
        nowMilliseconds = nowMs
        while let top = heap.first, top.deadline <= nowMs {
            removeEntry(at: 0)
            releaseNode(top.node)
            body(Instant(millisecondsSinceEpoch: top.deadline), top.payload)
        }
    }

    /// The earliest pending deadline (exact), or nil.
    public var nextDeadline: Instant? {
        heap.first.map { Instant(millisecondsSinceEpoch: $0.deadline) }
    }

    /// Reserves room for `n` live timers.
    public mutating func reserveCapacity(_ n: Int) {
        heap.reserveCapacity(n)
        nodes.reserveCapacity(n)
    }

    /// Bulk insertion: appends everything, then rebuilds the heap bottom-up in O(n).
    @inlinable
    public mutating func scheduleAll<S: Sequence>(_ timers: S) where S.Element == (Instant, UInt64) {
        reserveCapacity(count + timers.underestimatedCount)
        for (deadline, payload) in timers {
            let node = allocateNode()
            heap.append(Entry(deadline: deadline.millisecondsSinceEpoch, payload: payload, node: node))
        }
        heapify()
    }

    /// Bytes of storage held (array capacities).
    public var storageBytes: Int {
        heap.capacity * MemoryLayout<Entry>.stride + nodes.capacity * MemoryLayout<Node>.stride
    }
}

extension TimerHeap {
    @inlinable
    mutating func allocateNode() -> UInt32 {
        if freeHead != TimerHeap.none {
            let n = freeHead
            freeHead = nodes[Int(n)].link
            nodes[Int(n)].generation &+= 1
            return n
        }
        precondition(nodes.count < Int(TimerHeap.none), "TimerHeap: more than 2^32-1 timers")
        nodes.append(Node(generation: 1, link: 0))
        return UInt32(truncatingIfNeeded: nodes.count - 1)
    }

    @inlinable
    mutating func releaseNode(_ n: UInt32) {
        nodes[Int(n)].generation &+= 1
        nodes[Int(n)].link = freeHead
        freeHead = n
    }

    @inlinable
    mutating func removeEntry(at position: Int) {
        let last = heap.removeLast()
        guard position < heap.count else { return }
        heap[position] = last
        nodes[Int(last.node)].link = UInt32(truncatingIfNeeded: position)
        if position > 0 && Entry.precedes(last, heap[(position - 1) / 2]) {
            siftUp(position)
        } else {
            siftDown(position)
        }
    }

    @inlinable
    mutating func siftUp(_ start: Int) {
        var i = start
        let moving = heap[i]
        while i > 0 {
            let parent = (i - 1) / 2
            let p = heap[parent]
            guard Entry.precedes(moving, p) else { break }
            heap[i] = p
            nodes[Int(p.node)].link = UInt32(truncatingIfNeeded: i)
            i = parent
        }
        heap[i] = moving
        nodes[Int(moving.node)].link = UInt32(truncatingIfNeeded: i)
    }

    @inlinable
    mutating func siftDown(_ start: Int) {
        let n = heap.count
        var i = start
        let moving = heap[i]
        while true {
            let left = 2 * i + 1
            if left >= n { break }
            var child = left
            if left + 1 < n && Entry.precedes(heap[left + 1], heap[left]) { child = left + 1 }
            let c = heap[child]
            guard Entry.precedes(c, moving) else { break }
            heap[i] = c
            nodes[Int(c.node)].link = UInt32(truncatingIfNeeded: i)
            i = child
        }
        heap[i] = moving
        nodes[Int(moving.node)].link = UInt32(truncatingIfNeeded: i)
    }

    @usableFromInline
    mutating func heapify() {
        var i = heap.count / 2
        while i > 0 {
            i -= 1
            siftDown(i)
        }
        for position in heap.indices {
            nodes[Int(heap[position].node)].link = UInt32(truncatingIfNeeded: position)
        }
    }
}
