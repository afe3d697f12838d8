// Fixed-size blocks of node indices that form the wheel's slot lists (cache-friendly buckets).

/// A pool of 16-entry blocks of `UInt32` node indices. A wheel slot is a singly linked chain
/// of blocks: the head block is the only partly filled one, older blocks are full. Walking a
/// slot therefore reads indices sequentially and the node loads that follow are independent
/// of each other (the CPU overlaps their cache misses), unlike an intrusive linked list where
/// every step waits for the previous node. Blocks are recycled through a free list.
@usableFromInline
struct SlotBlockPool: Sendable {
    @usableFromInline static let shift = 4
    @usableFromInline static let size = 1 << shift
    @usableFromInline static let none: UInt32 = .max

    /// `entries[block << shift + i]` is the i-th node index of `block`.
    @usableFromInline var entries: ContiguousArray<UInt32> = []
    /// The next (older) block of the same chain, or the next free block.
    @usableFromInline var next: ContiguousArray<UInt32> = []
    @usableFromInline var freeHead: UInt32 = SlotBlockPool.none
    @inlinable init() {}

    @inlinable var blockCount: Int { next.count }

    /// Takes a free block (growing the pool geometrically when none is left).
    @inlinable @inline(__always)
    mutating func allocate() -> UInt32 {
        if freeHead == SlotBlockPool.none { grow(by: Swift.max(64, blockCount)) }
        let b = freeHead
        freeHead = next[Int(b)]
        return b
    }

    @inlinable @inline(__always)
    mutating func release(_ block: UInt32) {
        next[Int(block)] = freeHead
        freeHead = block
    }

    /// Adds `extra` blocks to the free list, lowest index first out.
    @usableFromInline
    mutating func grow(by extra: Int) {
        let first = blockCount
        precondition(first + extra < Int(SlotBlockPool.none) >> SlotBlockPool.shift, "TimingWheel: slot pool exhausted")
        entries.append(contentsOf: repeatElement(0, count: extra << SlotBlockPool.shift))
        next.reserveCapacity(first + extra)
        for b in first..<(first + extra) {
            next.append(b + 1 == first + extra ? freeHead : UInt32(b + 1))
        }
        freeHead = UInt32(first)
    }

    /// Makes sure at least `blocks` blocks exist in total (used blocks plus free ones).
    @inlinable
    mutating func reserve(blocks: Int) {
        if blocks > blockCount {
            entries.reserveCapacity(blocks << SlotBlockPool.shift)
            grow(by: blocks - blockCount)
        }
    }

    @inlinable var storageBytes: Int { entries.capacity * 4 + next.capacity * 4 }
}
