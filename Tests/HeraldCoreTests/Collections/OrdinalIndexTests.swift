// The users' index answers as a Dictionary<String, Int> would, through growth and at scale.
import HeraldCore
import Testing

@Suite struct OrdinalIndexTests {
    /// Keys added one by one from an empty index (growing many times): after each batch every key
    /// finds its own ordinal, and keys never added find none.
    @Test func everyKeyFindsItsOrdinalThroughGrowth() {
        var index = OrdinalIndex()
        var keys: [String] = []
        for batch in 0..<20 {
            for k in 0..<500 {
                let key = k % 3 == 0 ? "u\(batch)-\(k)" : "a-user-id-long-enough-for-heap-storage-\(batch)-\(k)"
                #expect(index.ordinal(of: key) { keys[$0] == key } == nil)
                index.insert(key, ordinal: keys.count)
                keys.append(key)
            }
            for (o, key) in keys.enumerated() where o % 7 == batch % 7 {
                #expect(index.ordinal(of: key) { keys[$0] == key } == o)
            }
            #expect(index.ordinal(of: "absent-\(batch)") { keys[$0] == "absent-\(batch)" } == nil)
        }
        #expect(index.count == 10_000)
        for (o, key) in keys.enumerated() { #expect(index.ordinal(of: key) { keys[$0] == key } == o) }
    }

    /// The empty string, one-byte keys and non-ASCII keys are keys like any other.
    @Test func oddKeysAreKeys() {
        let keys = ["", "a", "b", "é", "e\u{301}", "用户", "\u{0}x"]
        var index = OrdinalIndex(minimumCapacity: 2)
        for (o, k) in keys.enumerated() { index.insert(k, ordinal: o) }
        // "é" and "e\u{301}" are equal Strings (canonical equivalence): the first added is found for both.
        for (o, k) in keys.enumerated() {
            let found = index.ordinal(of: k) { keys[$0] == k }
            #expect(found == (k == "e\u{301}" ? 3 : o), "\(k.debugDescription)")
        }
    }

    /// Asking only when tags match: a caller whose rows never match finds nothing, and the index
    /// asks about no ordinal it does not hold.
    @Test func isKeyIsAskedOnlyAboutHeldOrdinals() {
        var index = OrdinalIndex()
        for o in 0..<1_000 { index.insert("k\(o)", ordinal: o) }
        var asked = Set<Int>()
        for q in 0..<2_000 {
            #expect(index.ordinal(of: "k\(q)") { asked.insert($0); return false } == nil)
        }
        #expect(asked.allSatisfy { (0..<1_000).contains($0) })
        #expect(asked.count >= 1_000, "every held key's own ordinal is asked about when it is looked up")
    }

    /// Reserving first, then adding: the same answers; `removeAll` forgets everything.
    @Test func reserveAndRemoveAll() {
        var index = OrdinalIndex()
        index.reserveCapacity(50_000)
        let keys = (0..<50_000).map { "user-\($0)" }
        for (o, k) in keys.enumerated() { index.insert(k, ordinal: o) }
        #expect(keys.indices.allSatisfy { i in index.ordinal(of: keys[i]) { keys[$0] == keys[i] } == i })
        index.removeAll()
        #expect(index.count == 0)
        #expect(index.ordinal(of: "user-1") { keys[$0] == "user-1" } == nil)
    }

    /// Finding or adding in one call: an absent key is added (nil back), a present one keeps its
    /// ordinal (given back) and nothing is added.
    @Test func ordinalOrInsertFindsOrAdds() {
        var index = OrdinalIndex()
        var keys: [String] = []
        for k in 0..<3_000 {
            let key = "id-\(k % 1_000)"
            let next = keys.count
            let found = index.ordinal(of: key, orInsert: next) { keys[$0] == key }
            if k < 1_000 {
                #expect(found == nil)
                keys.append(key)
            } else {
                #expect(found == k % 1_000)
            }
        }
        #expect(index.count == 1_000)
        for (o, key) in keys.enumerated() { #expect(index.ordinal(of: key) { keys[$0] == key } == o) }
    }
}
