// The snapshot writer on the loop: MB-sized parts stored by non-blocking COPY in slices while the loop turns; a lost connection gives one snapshot up, the next completes.
import Foundation
@testable import HeraldRuntime
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct SnapshotLinkTests {
    final class Box {
        var turns = 0
        var logs: [String] = []
    }

    static func run(_ loop: EventLoop, until done: () -> Bool) {
        let end = ClientConnection.monotonicMilliseconds() + 60_000
        while ClientConnection.monotonicMilliseconds() < end && !done() { loop.runOnce(block: true) }
    }

    static func part(_ n: Int, seed: UInt8) -> [UInt8] {
        (0..<n).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed)) }
    }

    @Test func partsOfMegabytesAreStoredInSlicesWhileTheLoopTurns() throws {
        let url = try TestPostgres.freshDatabase()
        let loop = EventLoop()
        let box = Box()
        let link = SnapshotLink(loop: loop, url: url) { box.logs.append($0) }
        var ticker: LoopEvent?
        ticker = loop.timer {
            box.turns += 1
            ticker?.arm(afterMilliseconds: 0)
        }
        ticker?.arm(afterMilliseconds: 0)

        let parts = [Self.part(4 << 20, seed: 1), Self.part(3 << 20, seed: 2), Self.part(1_000, seed: 3)]
        link.enqueue(.begin(throughSeq: 42, header: [1, 2, 3]))
        for (i, p) in parts.enumerated() { link.enqueue(.part(index: i, users: 10 + i, data: p)) }
        #expect(link.queuedBytes == parts.reduce(0) { $0 + $1.count })
        link.enqueue(.complete(users: 33, parts: parts.count, bytes: parts.reduce(0) { $0 + $1.count }))
        Self.run(loop) { link.completed == 1 || link.failed > 0 }
        #expect(link.completed == 1 && link.failed == 0, "\(box.logs)")
        #expect(link.queuedBytes == 0 && !link.isBusy)
        // 7 MB in 64 KB slices, at most four per callback: the loop turned between them.
        let slices = parts.reduce(0) { $0 + ($1.count + SnapshotUpload.sliceBytes - 1) / SnapshotUpload.sliceBytes }
        #expect(box.turns >= slices / SnapshotUpload.slicesPerTurn, "\(box.turns) loop turns for \(slices) slices")

        let conn = try PGConnection.connect(url)
        defer { conn.close() }
        let latest = try #require(try SnapshotStore.latest(conn))
        #expect(latest.throughSeq == 42 && latest.header == [1, 2, 3] && latest.users == 33 && latest.parts == 3)
        var read: [[UInt8]] = []
        try SnapshotStore.readParts(conn, id: latest.id) { read.append(Array($0)) }
        #expect(read == parts, "the stored bytes are the parts, in order")
        ticker = nil
    }

    @Test func aLostConnectionGivesOneSnapshotUpAndTheNextCompletes() throws {
        let url = try TestPostgres.freshDatabase()
        let loop = EventLoop()
        let box = Box()
        let link = SnapshotLink(loop: loop, url: url) { box.logs.append($0) }
        let admin = try PGConnection.connect(url)
        defer { admin.close() }

        link.enqueue(.begin(throughSeq: 1, header: [9]))
        Self.run(loop) { !link.isBusy }
        // Its connection is cut between begin and the first part.
        try admin.execute("""
            SELECT pg_terminate_backend(pid) FROM pg_stat_activity
            WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name = 'herald'
            """)
        link.enqueue(.part(index: 0, users: 1, data: Self.part(2 << 20, seed: 7)))
        link.enqueue(.complete(users: 1, parts: 1, bytes: 2 << 20))
        Self.run(loop) { !link.isBusy }
        #expect(link.failed == 1 && link.completed == 0, "\(box.logs)")
        #expect(box.logs.contains { $0.contains("snapshot not written") })

        link.enqueue(.begin(throughSeq: 2, header: [8]))
        link.enqueue(.part(index: 0, users: 1, data: Self.part(1 << 20, seed: 8)))
        link.enqueue(.complete(users: 1, parts: 1, bytes: 1 << 20))
        Self.run(loop) { link.completed == 1 || link.failed > 1 }
        #expect(link.completed == 1 && link.failed == 1, "\(box.logs)")
        let rows = try admin.execute("SELECT through_seq, completed_at IS NOT NULL FROM snapshots ORDER BY id")
        #expect(rows.rowCount == 1 && rows.int64(0, 0) == 2 && rows.bool(0, 1) == true, "the given-up snapshot is gone, the new one complete")
    }
}
