// MoveQueue: first in, first out across wrap-around and growth; every element freed exactly once.
import Testing
import HeraldCore

/// Counts live instances, so a test can see that the queue frees what it holds, once.
private final class Tracked {
    nonisolated(unsafe) static var live = 0
    let value: Int
    init(_ value: Int) { self.value = value; Tracked.live += 1 }
    deinit { Tracked.live -= 1 }
}

@Suite(.serialized) struct MoveQueueTests {
    /// Against an array as the model: random appends and pops keep the order, through the ring's
    /// wrap-around and every growth.
    @Test func popsInTheOrderAppendedThroughWrapAroundAndGrowth() {
        var queue = MoveQueue<Int>()
        var model: [Int] = []
        var rng = SystemRandomNumberGenerator()
        var next = 0
        for _ in 0..<20_000 {
            if Int.random(in: 0..<5, using: &rng) < 3 {
                queue.append(next); model.append(next); next += 1
            } else {
                let popped = queue.popFirst()
                #expect(popped == (model.isEmpty ? nil : model.removeFirst()))
            }
            // (`#expect` takes copies of what it looks at: a noncopyable queue is read first.)
            let count = queue.count
            #expect(count == model.count)
            if let first = model.first { let front = queue[0]; #expect(front == first) }
            if model.count > 2 { let back = queue[model.count - 1]; #expect(back == model.last!) }
        }
        #expect(queue.drainedToArray() == model)
    }

    @Test func removeAllWhereKeepsTheRestInOrder() {
        var queue = MoveQueue<Int>()
        for _ in 0..<5 { queue.append(-1); _ = queue.popFirst() }  // the head away from slot 0
        for i in 0..<30 { queue.append(i) }
        queue.removeAll { $0 % 3 == 0 }
        #expect(queue.drainedToArray() == (0..<30).filter { $0 % 3 != 0 })
    }

    @Test func takeLeavesTheQueueEmptyAndUsable() {
        var queue = MoveQueue<String>()
        queue.append("a"); queue.append("b")
        var taken = queue.take()
        let emptied = queue.isEmpty
        #expect(emptied)
        queue.append("c")
        let front = taken.popFirst()
        #expect(front == "a")
        #expect(taken.drainedToArray() == ["b"])
        #expect(queue.drainedToArray() == ["c"])
    }

    /// Elements left in the queue, popped, removed or dropped by `removeAll` are each freed once.
    @Test func freesEveryElementOnceWhateverWayItLeaves() {
        let before = Tracked.live
        do {
            var queue = MoveQueue<Tracked>()
            for i in 0..<100 { queue.append(Tracked(i)) }
            for _ in 0..<30 { _ = queue.popFirst() }
            queue.removeAll { $0.value % 2 == 0 }
            #expect(Tracked.live == before + 35)
            for i in 0..<50 { queue.append(Tracked(1000 + i)) }  // wraps and grows with live elements
            let front = queue[0].value
            #expect(front == 31)
        }
        #expect(Tracked.live == before)
        var emptied = MoveQueue<Tracked>()
        emptied.append(Tracked(1))
        emptied.removeAll()
        let isEmpty = emptied.isEmpty
        #expect(Tracked.live == before && isEmpty)
    }
}
