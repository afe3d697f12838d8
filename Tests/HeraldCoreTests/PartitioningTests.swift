// SPEC §9: a user's partition is FNV-1a 64 of the id's UTF-8 bytes, mod P.
import HeraldCore
import Testing

@Suite struct PartitioningTests {
    /// Known FNV-1a 64 vectors (the reference implementation's test suite).
    @Test func fnv1a64MatchesTheReferenceVectors() {
        #expect(Partitioning.fnv1a64("") == 0xcbf2_9ce4_8422_2325)
        #expect(Partitioning.fnv1a64("a") == 0xaf63_dc4c_8601_ec8c)
        #expect(Partitioning.fnv1a64("foobar") == 0x8594_4171_f739_67e8)
    }

    @Test func aUsersPartitionIsTheHashModP() {
        let p = Partitioning(count: 16)
        for user in ["alice", "bob", "ü-ser", "user-123456"] {
            #expect(p.partition(of: user) == Int(Partitioning.fnv1a64(user) % 16))
        }
        #expect(Partitioning.single.partition(of: "anyone") == 0)
    }

    /// The hash is over UTF-8 bytes: the same text in two Unicode normal forms is two ids.
    @Test func theHashIsOverUTF8BytesNotCharacters() {
        #expect(Partitioning.fnv1a64("\u{E9}") != Partitioning.fnv1a64("e\u{301}"))
    }
}
