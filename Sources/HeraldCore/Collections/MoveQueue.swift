// A first-in first-out queue that moves its elements in and out.

/// A FIFO ring buffer whose `append` consumes its argument and whose `popFirst` moves the
/// element out: nothing is copied on the way through.
///
/// Why not `Deque`: `Deque.append(_:)` borrows its argument and copies it into its storage, so
/// each queued request (a client's action, a writer's work item: strings, arrays, a closure)
/// was retained and released once more on the way in, twice a submit on the hot path.
/// Noncopyable, so the storage has exactly one owner and needs no uniqueness checks; `take()`
/// hands the whole queue over.
public struct MoveQueue<Element>: ~Copyable {
    // Inlinable throughout: the queues live in other modules, and an unspecialized generic call
    // went through the element's value witnesses.
    @usableFromInline var base: UnsafeMutablePointer<Element>?
    @usableFromInline var capacity = 0
    @usableFromInline var head = 0
    @usableFromInline var stored = 0  // `count`
    /// The number of queued elements.
    @inlinable public var count: Int { stored }

    /// An empty queue (no storage until the first `append`).
    @inlinable public init() {}

    @inlinable deinit {
        guard let base else { return }
        let firstRun = Swift.min(stored, capacity &- head)
        (base + head).deinitialize(count: firstRun)
        base.deinitialize(count: stored &- firstRun)
        base.deallocate()
    }

    /// Whether nothing is queued.
    @inlinable public var isEmpty: Bool { stored == 0 }

    @inlinable @inline(__always)
    func slot(_ offset: Int) -> Int {
        let s = head &+ offset
        return s >= capacity ? s &- capacity : s
    }

    /// Queues `element` at the back, moving it into the storage.
    @inlinable public mutating func append(_ element: consuming Element) {
        if stored == capacity { grow() }
        (base.unsafelyUnwrapped + slot(stored)).initialize(to: element)
        stored &+= 1
    }

    /// Moves the front element out, nil when empty.
    @inlinable public mutating func popFirst() -> Element? {
        guard stored > 0 else { return nil }
        return removeFirst()
    }

    /// Moves the front element out; the queue must not be empty.
    @inlinable public mutating func removeFirst() -> Element {
        precondition(stored > 0, "removeFirst() on an empty MoveQueue")
        let element = (base.unsafelyUnwrapped + head).move()
        head = head &+ 1 == capacity ? 0 : head &+ 1
        stored &-= 1
        if stored == 0 { head = 0 }
        return element
    }

    /// The element `offset` places from the front, borrowed where it lies.
    @inlinable public subscript(offset: Int) -> Element {
        _read {
            precondition(offset >= 0 && offset < stored, "MoveQueue offset \(offset) out of 0..<\(stored)")
            yield base.unsafelyUnwrapped[slot(offset)]
        }
    }

    /// Drops every element.
    @inlinable public mutating func removeAll() {
        while stored > 0 { _ = removeFirst() }
    }

    /// Keeps, in order, only the elements `shouldRemove` returns false for.
    @inlinable public mutating func removeAll(where shouldRemove: (borrowing Element) -> Bool) {
        for _ in 0..<stored {
            let element = removeFirst()
            if !shouldRemove(element) { append(element) }
        }
    }

    /// The queue's elements, leaving it empty (with no storage).
    @inlinable public mutating func take() -> MoveQueue<Element> {
        var taken = MoveQueue()
        swap(&self, &taken)
        return taken
    }

    /// The elements front to back, moved into an array (tests and tools).
    @inlinable public consuming func drainedToArray() -> [Element] {
        var out: [Element] = []
        out.reserveCapacity(stored)
        while let e = popFirst() { out.append(e) }
        return out
    }

    @usableFromInline mutating func grow() {
        let newCapacity = Swift.max(8, capacity &* 2)
        let fresh = UnsafeMutablePointer<Element>.allocate(capacity: newCapacity)
        if let old = base {
            let firstRun = Swift.min(stored, capacity &- head)
            fresh.moveInitialize(from: old + head, count: firstRun)
            (fresh + firstRun).moveInitialize(from: old, count: stored &- firstRun)
            old.deallocate()
        }
        base = fresh
        capacity = newCapacity
        head = 0
    }
}
