// The set of free timer nodes as a three-level bitmap that hands out the lowest index first.

/// Free node indices of the slab, one bit per node (about 0.13 byte per node), with two
/// summary levels so that finding the lowest free index takes three word scans.
///
/// Lowest-first keeps live timers packed at the low end of the slab, and timers scheduled
/// together (a rebuild, the next day's summaries right after today's fired) get neighbouring
/// nodes, so a burst later reads them page by page. A LIFO free list instead hands out nodes
/// in reverse release order, scattered over the whole slab: at 10M timers every node of a
/// burst then missed the TLB (nested paging in this VM makes those misses expensive).
///
/// The three levels share one array, laid out `[top | summary | words]`, so each operation
/// pays one uniqueness check instead of three.
@usableFromInline
struct FreeNodeBitmap: Sendable {
    /// `top` words, then `summary` words, then `words` (bit `i % 64` of word `i / 64`: node
    /// `i` is free). Summary bit `w`: word `w` is not zero. Top bit `s`: summary word `s` is
    /// not zero.
    @usableFromInline var bits: ContiguousArray<UInt64> = []
    @usableFromInline var summaryBase: Int = 0
    @usableFromInline var wordBase: Int = 0
    /// Number of `words` (nodes covered / 64).
    @usableFromInline var wordCount: Int = 0
    /// Every top word below this index is zero.
    @usableFromInline var cursor: Int = 0
    /// The number of free nodes.
    @usableFromInline var count: Int = 0

    @inlinable init() {}

    /// Marks node `index` free (it must not be free already).
    ///
    /// Branch-free on purpose: the bitmap word is usually a cache miss, and a branch on its
    /// old value ("was it empty?") would mispredict and stall the whole slot pass behind that
    /// miss. Setting the summary bits unconditionally is idempotent.
    @inlinable @inline(__always)
    mutating func insert(_ index: UInt32) {
        let w = Int(index &>> 6)
        if w >= wordCount { grow(toCover: w) }
        let s = w &>> 6
        let t = s &>> 6
        let summaryBase = self.summaryBase, wordBase = self.wordBase
        // Unchecked stores: `w < wordCount` was just ensured, and the layout sizes summary and
        // top from wordCount, so all three offsets are inside `bits`.
        bits.withUnsafeMutableBufferPointer { b in
            b[wordBase &+ w] |= 1 &<< UInt64(index & 63)
            b[summaryBase &+ s] |= 1 &<< UInt64(w & 63)
            b[t] |= 1 &<< UInt64(s & 63)
        }
        cursor = Swift.min(cursor, t)
        count &+= 1
    }

    /// Takes the lowest free index. Requires `count > 0`.
    @inlinable @inline(__always)
    mutating func removeLowest() -> UInt32 {
        precondition(count > 0, "FreeNodeBitmap: no free node")
        var t = cursor
        let summaryBase = self.summaryBase, wordBase = self.wordBase
        // Unchecked: count > 0 guarantees a set top bit at or above the cursor, and each set
        // bit names an existing summary word / word (the invariant insert and this maintain).
        let index: Int = bits.withUnsafeMutableBufferPointer { b in
            while b[t] == 0 { t &+= 1 }
            let s = t &<< 6 | b[t].trailingZeroBitCount
            let w = s &<< 6 | b[summaryBase &+ s].trailingZeroBitCount
            let word = b[wordBase &+ w]
            let remaining = word & (word &- 1)
            b[wordBase &+ w] = remaining
            if remaining == 0 {
                b[summaryBase &+ s] &= ~(1 &<< UInt64(w & 63))
                if b[summaryBase &+ s] == 0 { b[t] &= ~(1 &<< UInt64(s & 63)) }
            }
            return w &<< 6 | word.trailingZeroBitCount
        }
        cursor = t
        count &-= 1
        return UInt32(truncatingIfNeeded: index)
    }

    /// Marks every index in `batch` free, after sorting them (LSD radix, 8-bit digits, skipping
    /// digits the whole batch shares) so the bitmap is swept in address order: one random
    /// read-modify-write per freed node was the single largest cost of firing 10M timers.
    /// Empties `batch`; `scratch` is reused across calls.
    @usableFromInline
    mutating func insertAll(_ batch: inout ContiguousArray<UInt32>, scratch: inout ContiguousArray<UInt32>) {
        let n = batch.count
        if n == 0 { return }
        if n > 64 {
            var differing: UInt32 = 0
            let first = batch[0]
            var highest: UInt32 = 0
            for i in batch {
                differing |= i ^ first
                highest = Swift.max(highest, i)
            }
            if scratch.count != n {
                if scratch.count < n { scratch.append(contentsOf: repeatElement(0, count: n - scratch.count)) }
                else { scratch.removeLast(scratch.count - n) }
            }
            for digit in 0..<4 where (differing &>> UInt32(digit &* 8)) & 255 != 0 {
                FreeNodeBitmap.radixPass(digit: digit, from: batch, into: &scratch)
                swap(&batch, &scratch)
            }
            if highest >= UInt32(truncatingIfNeeded: wordCount &<< 6) { grow(toCover: Int(highest &>> 6)) }
        }
        for index in batch { insert(index) }
        batch.removeAll(keepingCapacity: true)
    }

    /// One stable counting-sort pass on byte `digit` of the indices.
    @usableFromInline
    static func radixPass(digit: Int, from source: ContiguousArray<UInt32>, into destination: inout ContiguousArray<UInt32>) {
        let shift = UInt32(digit &* 8)
        // Unsafe buffers: a pass moves every element; offsets come from a histogram of the
        // same elements and `destination` has the same count, so every store is in range.
        withUnsafeTemporaryAllocation(of: Int.self, capacity: 256) { counts in
            source.withUnsafeBufferPointer { src in
                destination.withUnsafeMutableBufferPointer { dst in
                    for i in 0..<256 { counts[i] = 0 }
                    for x in src { counts[Int((x &>> shift) & 255)] &+= 1 }
                    var sum = 0
                    for i in 0..<256 {
                        let c = counts[i]
                        counts[i] = sum
                        sum &+= c
                    }
                    for x in src {
                        let b = Int((x &>> shift) & 255)
                        dst[counts[b]] = x
                        counts[b] &+= 1
                    }
                }
            }
        }
    }

    /// Grows (doubling) so that word `w` exists.
    @usableFromInline
    mutating func grow(toCover w: Int) {
        reserve(words: Swift.max(w + 1, wordCount * 2, 64))
    }

    /// Sizes the bitmap for `nodes` nodes (never shrinks).
    @inlinable
    mutating func reserve(nodes: Int) {
        let words = (nodes + 63) / 64
        if words > wordCount { reserve(words: words) }
    }

    /// Re-lays the array for `newWordCount` words, keeping every free bit.
    @usableFromInline
    mutating func reserve(words newWordCount: Int) {
        let summaryCount = (newWordCount + 63) / 64
        let topCount = (summaryCount + 63) / 64
        var fresh = ContiguousArray<UInt64>(repeating: 0, count: topCount + summaryCount + newWordCount)
        let newSummaryBase = topCount
        let newWordBase = topCount + summaryCount
        for w in 0..<wordCount where bits[wordBase + w] != 0 {
            fresh[newWordBase + w] = bits[wordBase + w]
            fresh[newSummaryBase + w / 64] |= 1 << UInt64(w % 64)
            fresh[w / 4096] |= 1 << UInt64((w / 64) % 64)
        }
        bits = fresh
        summaryBase = newSummaryBase
        wordBase = newWordBase
        wordCount = newWordCount
        cursor = 0
    }

    @inlinable var storageBytes: Int { bits.capacity * 8 }
}
