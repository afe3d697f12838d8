// SPEC §9 with a member paused (SIGSTOP) past its lease: what it was sent is re-routed, never forwarded twice, and no take waits on its locks.
import Foundation
import Glibc
import HeraldCore
import HeraldStore
import HeraldTestSupport
import HeraldWireTesting
import Testing

@Suite(.serialized) struct ClusterPausedMemberTests {
    /// Two members; a is paused until b has taken its partition over; meanwhile a client of b sends
    /// a submit that b forwards to a (still the owner by b's last read), and another member's
    /// request for a's partition (`"route":{"partition":p}`) waits in a's socket. Once a resumes
    /// and finds itself fenced, both are refused with `not_owner` and nothing is sent on to b (two
    /// members sending each other's requests on like that deadlocked both links after a zombie):
    /// b stores its client's submit itself; the other member would re-route its own.
    @Test func aResumedZombieRefusesAnotherMembersRequestsAndItsForwardedOnesAreStoredByTheNewOwner() throws {
        let cluster = try TestCluster(partitions: 2, ttlSeconds: 1)
        let a = try cluster.start("a")
        try cluster.waitUntilEveryPartitionIsServed(via: a)
        let b = try cluster.start("b")
        let aAddress = "127.0.0.1:\(a.port)", bAddress = "127.0.0.1:\(b.port)"
        let routes = try cluster.waitUntilEveryPartitionIsServed(via: b) { $0.contains(aAddress) && $0.contains(bAddress) }
        let pa = try #require(routes.firstIndex(of: aAddress))
        let user = try #require((0..<100).map { "zombie-\($0)" }.first { cluster.partitions.partition(of: $0) == pa })
        let client = try cluster.producer(via: b, users: [user])
        func submit(_ id: String, route: String = "") -> String {
            #"{\#(route)"rid":1,"op":"submit","app":"com.example.cluster","id":"\#(id)","user":"\#(user)","title":"Paused"}"#
        }

        kill(a.pid, SIGSTOP)
        defer { kill(a.pid, SIGCONT) }
        // Forwarded to a, which b still reads as the owner: it waits in a's socket.
        try client.send(submit("in-flight"))
        try cluster.waitUntilEveryPartitionIsServed(via: b) { $0.allSatisfy { $0 == bAddress } }
        // As another member would send it, believing a owns the partition.
        let peer = try WireClient(port: a.port)
        try peer.send(#"{"op":"hello"}"#)
        try peer.send(submit("from-a-peer", route: #""route":{"partition":\#(pa)},"#))
        kill(a.pid, SIGCONT)

        #expect(try peer.readJSON()["ok"] == true)
        let refused = try peer.readJSON(timeoutMilliseconds: 20_000)
        #expect(refused["ok"] == false && refused["error"]?["code"] == "not_owner", "\(refused)")
        let stored = try client.readJSON(timeoutMilliseconds: 20_000)
        #expect(stored["ok"] == true && stored["partition"]?.intValue == Int64(pa), "\(stored)")
        // The refused request stored nothing: sent now, it is new.
        let again = try client.request(submit("from-a-peer"), timeoutMilliseconds: 20_000)
        #expect(again["ok"] == true && again["duplicate"] == nil, "\(again)")
        // a sent neither b's request nor the other member's on to b.
        let stats = try WireClient(port: a.port)
        _ = try stats.request(#"{"op":"hello"}"#)
        let counts = try stats.request(#"{"op":"stats"}"#)
        #expect(counts["forwardedRemote"] == 0, "\(counts)")
    }

    /// A free partition whose row is locked, as by an owner paused in the middle of an append: the
    /// member that takes it over gives the take up after a moment and serves everything else (its
    /// loop, router included, does not wait for the lock), then takes it once the lock is gone.
    @Test func aTakeWaitingOnAPausedOwnersLockDoesNotStopTheMember() throws {
        try Self.takeWaitingOnALock(citus: false)
    }

    /// The same on Citus, where Citus is installed.
    @Test(.enabled(if: TestCitus.isInstalled, Comment(rawValue: TestCitus.missingReason ?? "")))
    func onCitusATakeWaitingOnAPausedOwnersLockDoesNotStopTheMember() throws {
        try Self.takeWaitingOnALock(citus: true)
    }

    static func takeWaitingOnALock(citus: Bool) throws {
        let cluster = try TestCluster(partitions: 2, ttlSeconds: 1, citus: citus)
        let zombie = try PGConnection.connect(cluster.url)
        defer { zombie.close() }
        try zombie.execute("BEGIN")
        try zombie.execute("SELECT epoch FROM partitions WHERE partition = 1 FOR UPDATE")
        // Started here rather than by `cluster.start`, to be told within seconds when its loop is held.
        let log = FileManager.default.temporaryDirectory.path + "/herald-cluster-\(getpid())-locked-\(UInt32.random(in: 0...UInt32.max)).log"
        let a = try ServeProcess(databaseURL: cluster.url, logPath: log, extraArguments: ["--instance", "a", "--lease-ttl", "1"])
        defer { a.kill9() }
        try a.start(timeoutSeconds: 10)
        let user = try #require((0..<100).map { "locked-\($0)" }.first { cluster.partitions.partition(of: $0) == 0 })
        let client = try WireClient(port: a.port)
        #expect(try client.request(#"{"op":"hello"}"#, timeoutMilliseconds: 2_000)["ok"] == true)
        #expect(try client.request(#"{"op":"authorization","user":"\#(user)","app":"com.example.cluster","status":"authorized","options":["alert"]}"#,
                                   timeoutMilliseconds: 5_000)["ok"] == true)
        let ack = try client.request(#"{"op":"submit","app":"com.example.cluster","id":"beside-a-lock","user":"\#(user)","title":"Served"}"#,
                                     timeoutMilliseconds: 5_000)
        #expect(ack["ok"] == true && ack["partition"] == 0, "\(ack)")
        #expect(try cluster.served(by: a) == [0])
        try zombie.execute("COMMIT")
        try cluster.waitUntilEveryPartitionIsServed(via: a, seconds: 10)
    }
}
