// A generation-checked reference to one scheduled timer, shared by TimingWheel and TimerHeap.

/// Identifies one scheduled timer so it can be cancelled.
///
/// A handle is a slot index plus the slot's generation at the time of scheduling. A slot's
/// generation is odd while a timer lives in it and even while it is free, and it changes on
/// every allocation and every release, so a handle kept after its timer fired or was
/// cancelled no longer matches: cancelling it is a harmless no-op that returns `false`, even
/// if the slot now holds a different timer. (Generations wrap after 2^31 reuses of one slot.)
public struct TimerHandle: Hashable, Sendable, CustomStringConvertible {
    /// Index of the timer's node in its structure's slab.
    public let index: UInt32
    /// Generation of that node when the timer was scheduled (always odd for a real handle).
    public let generation: UInt32

    @inlinable
    init(index: UInt32, generation: UInt32) {
        self.index = index
        self.generation = generation
    }

    /// `TimerHandle(index#generation)`, for logs and test failures.
    public var description: String { "TimerHandle(\(index)#\(generation))" }
}
