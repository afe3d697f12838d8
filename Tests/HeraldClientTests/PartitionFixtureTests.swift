// The partition fixture shared by the three clients (clients/testdata/partitions.json) agrees with the server's function.
import Foundation
import HeraldClient
import HeraldCore
import Testing

@Suite struct PartitionFixtureTests {
    static func fixture() throws -> [JSONValue] {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("clients/testdata/partitions.json")
        let value = try JSONValue.parse(Array(try Data(contentsOf: url)))
        #expect(value["partitionCounts"] == [1, 4, 16, 1024])
        return try #require(value["cases"]?.arrayValue)
    }

    /// Every user of the fixture (empty, non-ASCII, control characters) hashes and falls in the
    /// fixture's partition by the server's `HeraldCore.Partitioning` and by the client's own.
    @Test func everyUserFallsInTheFixturesPartitionOnTheServerAndInTheClient() throws {
        let cases = try Self.fixture()
        #expect(cases.count >= 30 && cases.contains { $0["user"] == "" } && cases.contains { !($0["user"]?.stringValue ?? "").allSatisfy(\.isASCII) })
        for c in cases {
            let user = try #require(c["user"]?.stringValue)
            let hash = String(HeraldCore.Partitioning.fnv1a64(user), radix: 16)
            #expect(String(repeating: "0", count: 16 - hash.count) + hash == c["fnv1a64"]?.stringValue, "\(user.debugDescription)")
            #expect(HeraldClient.Partitioning.fnv1a64(user.utf8) == HeraldCore.Partitioning.fnv1a64(user))
            for (count, expected) in try #require(c["partitions"]?.objectValue) {
                let p = try #require(Int(count))
                #expect(HeraldCore.Partitioning(count: p).partition(of: user) == Int(expected.intValue ?? -1), "\(user.debugDescription) mod \(p)")
                #expect(HeraldClient.Partitioning.partition(ofUser: user, partitions: p) == Int(expected.intValue ?? -1), "\(user.debugDescription) mod \(p)")
            }
        }
    }
}
