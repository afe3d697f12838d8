// One tick's expiries in firing order: the (deadline, payload) rule and a radix sort for bursts.

/// A timer taken out of the wheel during `advance`, ordered by (deadline, payload).
@usableFromInline
struct FiredTimer: Comparable, Sendable {
    @usableFromInline var deadline: Int64
    @usableFromInline var payload: UInt64

    @inlinable init(deadline: Int64, payload: UInt64) {
        self.deadline = deadline
        self.payload = payload
    }

    @inlinable static func < (a: FiredTimer, b: FiredTimer) -> Bool {
        a.deadline != b.deadline ? a.deadline < b.deadline : a.payload < b.payload
    }

    /// Byte `digit` (0...15) of the sort key: payload bytes 0-7 (least significant first),
    /// then deadline bytes 0-7 with the sign flipped so that unsigned order is signed order.
    @inlinable @inline(__always)
    func keyByte(_ digit: Int) -> Int {
        let word = digit < 8 ? payload : UInt64(bitPattern: deadline) ^ (1 &<< 63)
        return Int(truncatingIfNeeded: (word &>> UInt64((digit & 7) &* 8)) & 255)
    }
}

/// Sorts a batch of expiries. Small batches use the standard library's sort; a burst (say a
/// million summaries due at 08:00) uses a stable LSD radix sort that skips the key bytes on
/// which the whole batch agrees (usually the deadline and the high payload bytes), about ten
/// times faster than a comparison sort here. Scratch buffers are kept by the caller.
@usableFromInline
struct FiredBatchSorter: Sendable {
    @usableFromInline var scratch: ContiguousArray<FiredTimer> = []
    @usableFromInline var counts: ContiguousArray<Int> = []

    @inlinable init() {}

    @usableFromInline
    mutating func sort(_ batch: inout ContiguousArray<FiredTimer>) {
        let n = batch.count
        if n < 256 {
            batch.sort()
            return
        }
        let first = batch[0]
        var differingPayload: UInt64 = 0
        var differingDeadline: UInt64 = 0
        for f in batch {
            differingPayload |= f.payload ^ first.payload
            differingDeadline |= UInt64(bitPattern: f.deadline ^ first.deadline)
        }
        if scratch.count < n {
            scratch.append(contentsOf: repeatElement(first, count: n - scratch.count))
        } else if scratch.count > n {
            scratch.removeLast(scratch.count - n)
        }
        if counts.count != 256 { counts = ContiguousArray(repeating: 0, count: 256) }
        for digit in 0..<16 {
            let differing = digit < 8 ? differingPayload : differingDeadline
            if (differing &>> UInt64((digit & 7) &* 8)) & 255 == 0 { continue }
            FiredBatchSorter.pass(digit: digit, from: batch, into: &scratch, counts: &counts)
            swap(&batch, &scratch)
        }
    }

    /// One stable counting-sort pass on key byte `digit`.
    @usableFromInline
    static func pass(digit: Int, from source: ContiguousArray<FiredTimer>, into destination: inout ContiguousArray<FiredTimer>,
                     counts: inout ContiguousArray<Int>) {
        // Unsafe buffers: this loop moves every element of a burst; the offsets come from a
        // histogram of the same elements, so each store lands inside `destination` (same count).
        counts.withUnsafeMutableBufferPointer { counts in
            source.withUnsafeBufferPointer { src in
                destination.withUnsafeMutableBufferPointer { dst in
                    for i in 0..<256 { counts[i] = 0 }
                    for f in src { counts[f.keyByte(digit)] &+= 1 }
                    var sum = 0
                    for i in 0..<256 {
                        let c = counts[i]
                        counts[i] = sum
                        sum &+= c
                    }
                    for f in src {
                        let b = f.keyByte(digit)
                        dst[counts[b]] = f
                        counts[b] &+= 1
                    }
                }
            }
        }
    }

    @inlinable var storageBytes: Int {
        scratch.capacity * MemoryLayout<FiredTimer>.stride + counts.capacity * MemoryLayout<Int>.stride
    }
}
