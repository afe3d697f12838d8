// The client's partition function is SPEC §9's: FNV-1a 64 of the user id's UTF-8 bytes, modulo P.
@testable import HeraldClient
import Testing

@Suite struct PartitioningTests {
    /// The FNV reference vectors (Fowler, Noll, Vo: the FNV-1a 64-bit test suite).
    @Test(arguments: [
        ("", 0xcbf2_9ce4_8422_2325 as UInt64),
        ("a", 0xaf63_dc4c_8601_ec8c),
        ("foobar", 0x8594_4171_f739_67e8),
    ])
    func fnv1a64MatchesTheReferenceVectors(text: String, hash: UInt64) {
        #expect(Partitioning.fnv1a64(text.utf8) == hash)
    }

    /// Hashed as UTF-8 bytes (not UTF-16, not characters): "é" is the two bytes C3 A9.
    @Test func aUsersPartitionIsItsUTF8BytesHashModuloThePartitionCount() {
        #expect(Partitioning.fnv1a64("é".utf8) == Partitioning.fnv1a64([0xC3, 0xA9]))
        #expect(Partitioning.partition(ofUser: "foobar", partitions: 8) == Int(0x8594_4171_f739_67e8 as UInt64 % 8))
        #expect(Partitioning.partition(ofUser: "a", partitions: 3) == Int(0xaf63_dc4c_8601_ec8c as UInt64 % 3))
        #expect(Partitioning.partition(ofUser: "anyone", partitions: 1) == 0)
    }

    /// hello's `partitions`, `hash` and `routes` (a list, or an object keyed by partition) are
    /// what the producer routes by; a server without them has one partition and no routes.
    @Test func helloRoutesAreReadAsListOrObject() throws {
        let list = HelloReply(reply: try #require(HeraldJSON.parse(#"{"ok":true,"op":"hello","partitions":2,"hash":"fnv1a64","instance":"a","routes":[{"partition":0,"address":"10.0.0.1:7411","epoch":3},{"partition":1,"address":"10.0.0.2:7411","epoch":5}]}"#).objectValue))
        #expect(list.partitions == 2 && list.hash == "fnv1a64" && list.instance == "a")
        #expect(list.routes == [Route(partition: 0, address: "10.0.0.1:7411", epoch: 3), Route(partition: 1, address: "10.0.0.2:7411", epoch: 5)])
        let object = HelloReply(reply: try #require(HeraldJSON.parse(#"{"ok":true,"partitions":2,"routes":{"1":{"address":"b:1","epoch":1},"0":{"address":"a:1","epoch":1}}}"#).objectValue))
        #expect(object.routes.map(\.address) == ["a:1", "b:1"])
        let single = HelloReply(reply: ["ok": true, "server": "herald/1", "roles": ["admin"]])
        #expect(single.partitions == 1 && single.routes.isEmpty && single.roles == ["admin"])
    }
}
