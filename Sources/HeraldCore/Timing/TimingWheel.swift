// The hierarchical timing wheel: O(1) schedule and cancel, exact in-order expiry, far jumps.

/// A hierarchical timing wheel holding every pending timer of the engine.
///
/// Time is counted in ticks (`tickMilliseconds`, 1 ms by default). There are 11 levels of
/// 64 slots; level `L` slots are 64^L ticks wide, so the levels span all 2^64 tick values:
/// any `Int64` deadline has a place and there is no overflow list (10 years of 1 ms ticks
/// need only 39 bits; the upper levels cost 64 empty slots each and are never walked).
///
/// A timer lives at the level of the highest base-64 digit in which its deadline tick
/// differs from the current tick, in the slot named by that digit. Every timer at a lower
/// level is therefore earlier than every timer at a higher level, and within a level slot
/// order is time order. `advance(to:)` jumps from one occupied slot to the next using a
/// 64-bit occupancy bitmap per level, never walking empty ticks, so jumping a month or a
/// decade costs only the slots it must process. When time enters a coarse slot it jumps
/// further, to the slot's smallest deadline (nothing can be due before it), and the slot's
/// timers are re-placed one or more levels down ("cascading"); those whose tick has been
/// reached fire straight away. A timer fires only once the current tick has reached its
/// own, and within a tick only if its exact deadline is <= `now`: never early.
///
/// Timers are 24-byte value nodes in a slab (`TimerSlab`) addressed by `UInt32` indices;
/// slots are chains of 16-index blocks (`SlotBlockPool`); handles carry a generation so a
/// stale cancel is harmless. Freed nodes and blocks are reused, so the steady state
/// allocates nothing.
///
/// **Cancel is lazy.** Cancelling only marks the node dead (its generation turns even): it
/// touches one cache line. The dead entry stays in its slot and its node is reclaimed when
/// that slot is next processed (cascaded or fired). So that dead timers cannot pile up
/// (say far-future timers cancelled over and over), the wheel reclaims before it grows:
/// when a node is needed, none is free and at least 1/8 of all nodes are cancelled ones, a
/// compaction pass re-buckets every slot and frees them all (amortized O(1) per cancel;
/// the slab only grows while fewer than 1/8 of its nodes are cancelled ones, so it stays
/// below 8/7 of the peak live count, or what `reserveCapacity` asked for).
///
/// **Firing order.** Timers fire in deadline order; timers with equal deadlines fire in
/// ascending payload order. (Timers with equal deadline *and* payload are indistinguishable
/// to the callback.) The rule does not depend on scheduling order, so a wheel rebuilt
/// after a restart by `scheduleAll` in any order fires exactly as the original would have.
///
/// **Time.** The wheel's time starts at `start` and only moves forward: `advance(to:)` with
/// an earlier instant does not move it back (it still fires timers already due).
public struct TimingWheel: Sendable {
    @usableFromInline static let levelBits = 6
    @usableFromInline static let slotsPerLevel = 64
    @usableFromInline static let levelCount = 11
    @usableFromInline static let slotCount = levelCount * slotsPerLevel

    @usableFromInline var slab = TimerSlab()
    @usableFromInline var pool = SlotBlockPool()
    /// All slots, level by level: slot `level * 64 + digit`.
    @usableFromInline var slots: ContiguousArray<WheelSlot>
    /// Bit `d` of `occupied[level]` is set iff slot `level * 64 + d` holds a timer.
    @usableFromInline var occupied: ContiguousArray<UInt64>
    /// The current tick as an order-preserving unsigned key (see `key(_:)`).
    @usableFromInline var current: UInt64
    /// The last instant the wheel was advanced to (milliseconds since the epoch).
    @usableFromInline var nowMilliseconds: Int64
    /// The tick length in milliseconds (>= 1).
    public let tickMilliseconds: Int64
    /// Scratch for one tick's expiries (sorted before the callback); keeps its capacity.
    @usableFromInline var fired: ContiguousArray<FiredTimer> = []
    /// Scratch for sorting large batches (bursts); keeps its capacity.
    @usableFromInline var sorter = FiredBatchSorter()

    /// Creates an empty wheel whose time is `start`.
    /// - Parameter tickMilliseconds: the tick length, at least 1. With ticks longer than
    ///   1 ms a timer still fires exactly when `now >= deadline`, never before.
    public init(start: Instant, tickMilliseconds: Int64 = 1) {
        precondition(tickMilliseconds >= 1, "TimingWheel: tick must be at least 1 ms")
        self.tickMilliseconds = tickMilliseconds
        self.nowMilliseconds = start.millisecondsSinceEpoch
        self.slots = ContiguousArray(repeating: .empty, count: TimingWheel.slotCount)
        self.occupied = ContiguousArray(repeating: 0, count: TimingWheel.levelCount)
        self.current = 0
        self.current = key(start.millisecondsSinceEpoch)
    }

    /// The number of live (scheduled, not yet fired or cancelled) timers.
    public var count: Int { slab.liveCount }

    /// The instant the wheel was last advanced to (or its start).
    public var now: Instant { Instant(millisecondsSinceEpoch: nowMilliseconds) }

    /// Schedules a timer. A deadline at or before the wheel's current time fires on the next
    /// `advance(to:)`. O(1).
    @inlinable @discardableResult
    public mutating func schedule(at deadline: Instant, payload: UInt64) -> TimerHandle {
        let d = deadline.millisecondsSinceEpoch
        let (index, generation) = allocateNode(deadline: d, payload: payload)
        place(index, deadline: d)
        return TimerHandle(index: index, generation: generation)
    }

    /// Cancels a timer. Returns `false` (and changes nothing) if the handle's timer already
    /// fired, was cancelled, or the handle is stale or foreign. O(1).
    @inlinable @discardableResult
    public mutating func cancel(_ handle: TimerHandle) -> Bool {
        guard slab.isLive(handle) else { return false }
        slab.nodes[Int(handle.index)].generation &+= 1  // even: dead; reclaimed with its slot
        slab.liveCount &-= 1
        slab.cancelledCount &+= 1
        return true
    }

    /// Fires every timer with deadline <= `now`, in deadline order, ties by ascending payload,
    /// calling `body(deadline, payload)` for each, then sets the wheel's time to `now` (if
    /// later). Empty stretches are skipped via the occupancy bitmaps, so any jump is cheap.
    /// `body` must not touch this wheel (exclusive access); collect and reschedule after.
    public mutating func advance(to now: Instant, _ body: (Instant, UInt64) -> Void) {
        let nowMs = Swift.max(now.millisecondsSinceEpoch, nowMilliseconds)
        nowMilliseconds = nowMs
        let target = key(nowMs)
        while true {
            if slots[Int(current & 63)].head != SlotBlockPool.none {
                process(slot: Int(current & 63), firingUpTo: current < target ? .max : nowMs, fires: true)
            }
            if !fired.isEmpty { flushFired(body) }
            if current == target { break }
            guard let (tick, level) = nextOccupied(), tick <= target else {
                current = target
                break
            }
            if level == 0 {
                current = tick
            } else {
                // Time enters a coarse slot. Nothing is pending before the slot's minimum
                // deadline (lower levels are empty, the slot holds nothing earlier), so jump
                // straight to it: a burst due in one tick is then fired straight out of the
                // coarse slot in a single pass instead of one cascade per level.
                let slot = level &* 64 &+ Int((tick &>> UInt64(level &* 6)) & 63)
                current = Swift.min(Swift.max(key(slots[slot].minimum), tick), target)
                process(slot: slot, firingUpTo: current < target ? .max : nowMs, fires: true)
            }
        }
        if !slab.pendingFree.isEmpty { slab.flushPendingFree() }  // reusable, lowest index first
    }

    /// The earliest pending deadline, or nil when no timer is pending.
    ///
    /// Never later than the true earliest deadline. It is exact unless the earliest timer of
    /// a slot was cancelled (a slot remembers its minimum until it is processed, and
    /// cancelled entries stay until then); it may then be that cancelled, earlier deadline,
    /// and advancing to it fires nothing but makes the value exact. It may be at or before
    /// `now` when overdue timers wait for the next `advance`: advance at once then.
    public var nextDeadline: Instant? {
        if slab.liveCount == 0 { return nil }
        let currentSlot = Int(current & 63)
        if slots[currentSlot].head != SlotBlockPool.none {
            return Instant(millisecondsSinceEpoch: slots[currentSlot].minimum)
        }
        guard let (tick, level) = nextOccupied() else { return nil }
        let slot = level &* 64 &+ Int((tick &>> UInt64(level &* 6)) & 63)
        return Instant(millisecondsSinceEpoch: slots[slot].minimum)
    }

    /// Reserves room for `n` live timers so that scheduling up to `n` allocates nothing.
    public mutating func reserveCapacity(_ n: Int) {
        guard n > 0 else { return }
        // Cancelled nodes still waiting in their slots hold their nodes until reclaimed.
        let nodes = n + slab.cancelledCount
        slab.reserveCapacity(nodes)
        // One block entry per node in a slot, plus at most one partly filled block per slot.
        pool.reserve(blocks: (nodes + SlotBlockPool.size - 1) / SlotBlockPool.size + Swift.min(nodes, TimingWheel.slotCount))
    }

    /// Schedules many timers at once (rebuilding after a restart). Handles are not returned.
    /// Equivalent to calling `schedule` for each element, in any order; capacity is reserved
    /// up front from the sequence's `underestimatedCount`.
    @inlinable
    public mutating func scheduleAll<S: Sequence>(_ timers: S) where S.Element == (Instant, UInt64) {
        let expected = timers.underestimatedCount
        if expected > 0 { reserveCapacity(count + expected) }
        for (deadline, payload) in timers {
            insert(deadline: deadline.millisecondsSinceEpoch, payload: payload)
        }
    }

    /// Bytes of storage the wheel holds (array capacities, not just the live part).
    public var storageBytes: Int {
        slab.storageBytes + pool.storageBytes
            + slots.capacity * MemoryLayout<WheelSlot>.stride
            + occupied.capacity * 8 + fired.capacity * MemoryLayout<FiredTimer>.stride + sorter.storageBytes
    }
}

// MARK: - Internals

extension TimingWheel {
    /// Maps a deadline to its tick as an unsigned key whose order is the tick order
    /// (flipping the sign bit turns two's-complement order into unsigned order).
    @inlinable @inline(__always)
    func key(_ milliseconds: Int64) -> UInt64 {
        let tick: Int64
        if tickMilliseconds == 1 {
            tick = milliseconds
        } else {
            let q = milliseconds / tickMilliseconds
            tick = (milliseconds % tickMilliseconds != 0 && milliseconds < 0) ? q - 1 : q
        }
        return UInt64(bitPattern: tick) ^ (1 &<< 63)
    }

    /// Schedules without building a handle (bulk loading).
    @usableFromInline
    mutating func insert(deadline: Int64, payload: UInt64) {
        let (index, _) = allocateNode(deadline: deadline, payload: payload)
        place(index, deadline: deadline)
    }

    /// Takes a node (a free one first, else a new one) and gives it a new odd generation.
    @inlinable @inline(__always)
    mutating func allocateNode(deadline: Int64, payload: UInt64) -> (index: UInt32, generation: UInt32) {
        slab.liveCount &+= 1
        if slab.free.count == 0 {
            if slab.pendingFree.isEmpty && slab.cancelledCount > 0 && slab.cancelledCount >= slab.nodes.count &>> 3 {
                compact()
            }
            if !slab.pendingFree.isEmpty { slab.flushPendingFree() }
        }
        if slab.free.count > 0 {
            let index = slab.free.removeLowest()
            let i = Int(index)
            let generation = slab.nodes[i].generation &+ 1
            slab.nodes[i] = TimerNode(deadline: deadline, payload: payload, generation: generation)
            return (index, generation)
        }
        precondition(slab.nodes.count < Int(UInt32.max), "TimingWheel: more than 2^32-1 timers")
        slab.nodes.append(TimerNode(deadline: deadline, payload: payload, generation: 1))
        if slab.nodes.count > slab.free.wordCount &<< 6 { slab.free.reserve(nodes: slab.nodes.capacity) }
        return (UInt32(truncatingIfNeeded: slab.nodes.count &- 1), 1)
    }

    /// Reclaims every cancelled node by re-bucketing all slots (see "Cancel is lazy").
    @usableFromInline
    mutating func compact() {
        for level in 0..<TimingWheel.levelCount {
            var bits = occupied[level]
            while bits != 0 {
                let digit = bits.trailingZeroBitCount
                bits &= bits &- 1
                process(slot: level &* 64 &+ digit, firingUpTo: .min, fires: false)  // live entries land back in their slot
            }
        }
    }

    /// Puts a node in the slot its deadline belongs to, relative to the current tick.
    @inlinable @inline(__always)
    mutating func place(_ index: UInt32, deadline: Int64) {
        let k = key(deadline)
        let slot: Int
        if k <= current {
            slot = Int(current & 63)  // due: the current slot, fired by the next advance
        } else {
            let level = (63 &- (k ^ current).leadingZeroBitCount) / 6
            slot = level &* 64 &+ Int((k &>> UInt64(level &* 6)) & 63)
        }
        append(index, deadline: deadline, to: slot)
    }

    @inlinable @inline(__always)
    mutating func append(_ index: UInt32, deadline: Int64, to slot: Int) {
        var s = slots[slot]
        if s.fill == UInt32(SlotBlockPool.size) {
            if s.head == SlotBlockPool.none {
                occupied[slot &>> 6] |= 1 &<< UInt64(slot & 63)
            }
            let b = pool.allocate()
            pool.next[Int(b)] = s.head
            s.head = b
            s.fill = 0
        }
        pool.entries[Int(s.head &<< UInt32(SlotBlockPool.shift) | s.fill)] = index
        s.fill &+= 1
        if deadline < s.minimum { s.minimum = deadline }
        slots[slot] = s
    }

    /// Detaches a slot: returns its chain and leaves it empty.
    @inlinable @inline(__always)
    mutating func detach(slot: Int) -> WheelSlot {
        let s = slots[slot]
        slots[slot] = .empty
        occupied[slot &>> 6] &= ~(1 &<< UInt64(slot & 63))
        return s
    }

    /// Loads the nodes of one block's entries into registers/stack first, in a tight loop of
    /// independent loads, so their cache misses overlap instead of being paid one by one.
    @inlinable @inline(__always)
    func gather(block base: Int, count n: Int) -> (deadlines: SIMD16<Int64>, payloads: SIMD16<UInt64>, generations: SIMD16<UInt32>) {
        var deadlines = SIMD16<Int64>()
        var payloads = SIMD16<UInt64>()
        var generations = SIMD16<UInt32>()
        // Unchecked reads: every entry of a used block is a valid node index (the wheel wrote it).
        slab.nodes.withUnsafeBufferPointer { nodes in
            pool.entries.withUnsafeBufferPointer { entries in
                for j in 0..<n {
                    let node = nodes[Int(entries[base &+ j])]
                    deadlines[j] = node.deadline
                    payloads[j] = node.payload
                    generations[j] = node.generation
                }
            }
        }
        return (deadlines, payloads, generations)
    }

    /// Empties a slot: reclaims cancelled entries, moves timers that are due now (tick at or
    /// before the current one and deadline <= `limit`) to the `fired` batch, and re-places the
    /// rest relative to the current tick (one or more levels down when time has just entered
    /// a coarse slot; back into the same slot during compaction). One pass serves cascading,
    /// firing and compaction, and each node is read once, in gathered blocks.
    @usableFromInline
    mutating func process(slot: Int, firingUpTo limit: Int64, fires: Bool) {
        let s = detach(slot: slot)
        var block = s.head
        var n = Int(s.fill)
        while block != SlotBlockPool.none {
            let base = Int(block) &<< SlotBlockPool.shift
            let batch = gather(block: base, count: n)
            for j in 0..<n {
                let index = pool.entries[base &+ j]
                let generation = batch.generations[j]
                let deadline = batch.deadlines[j]
                if generation & 1 == 0 {  // cancelled: reclaim the node now
                    slab.release(index)
                    slab.cancelledCount &-= 1
                } else if fires && deadline <= limit && key(deadline) <= current {
                    fired.append(FiredTimer(deadline: deadline, payload: batch.payloads[j]))
                    slab.nodes[Int(index)].generation = generation &+ 1
                    slab.liveCount &-= 1
                    slab.release(index)
                } else {
                    place(index, deadline: deadline)
                }
            }
            let next = pool.next[Int(block)]
            pool.release(block)  // safe: all its entries were read
            block = next
            n = SlotBlockPool.size
        }
    }

    /// Reports the batch of due timers in (deadline, payload) order and clears it.
    @usableFromInline
    mutating func flushFired(_ body: (Instant, UInt64) -> Void) {
        if fired.count > 1 {
            var inOrder = true
            var previous = fired[0]
            for f in fired.dropFirst() {
                if f < previous { inOrder = false; break }
                previous = f
            }
            if !inOrder { sorter.sort(&fired) }
        }
        for f in fired {
            body(Instant(millisecondsSinceEpoch: f.deadline), f.payload)
        }
        fired.removeAll(keepingCapacity: true)
    }

    /// The next tick after the current one at which something must happen: the first
    /// occupied slot of the lowest non-empty level (a level-0 slot fires, a higher one
    /// cascades at its start). Lower levels always come first, so this is the earliest.
    @inlinable
    func nextOccupied() -> (tick: UInt64, level: Int)? {
        let c = current
        let above0 = (UInt64.max &<< (c & 63)) &<< 1
        let m0 = occupied[0] & above0
        if m0 != 0 {
            return ((c & ~63) | UInt64(m0.trailingZeroBitCount), 0)
        }
        var level = 1
        while level < TimingWheel.levelCount {
            let shift = UInt64(level &* 6)
            let m = occupied[level] & ((UInt64.max &<< ((c >> shift) & 63)) &<< 1)
            if m != 0 {
                let upper = shift &+ 6
                let base = upper >= 64 ? 0 : (c >> upper) << upper
                return (base | (UInt64(m.trailingZeroBitCount) << shift), level)
            }
            level &+= 1
        }
        return nil
    }
}

/// One wheel slot: a chain of index blocks and a lower bound of its deadlines.
@usableFromInline
struct WheelSlot: Sendable {
    /// The newest (only partly filled) block, or `SlotBlockPool.none` when empty.
    @usableFromInline var head: UInt32
    /// Entries used in `head` (1...16); 16 when empty so the next append takes a new block.
    @usableFromInline var fill: UInt32
    /// Minimum deadline appended since the slot was last empty (a lower bound after cancels).
    @usableFromInline var minimum: Int64

    @usableFromInline static let empty = WheelSlot(head: SlotBlockPool.none, fill: UInt32(SlotBlockPool.size), minimum: .max)

    @inlinable init(head: UInt32, fill: UInt32, minimum: Int64) {
        self.head = head
        self.fill = fill
        self.minimum = minimum
    }
}
