// Experiment 5 (docs/reliability.md): a reader following positions never skips a committed
// event — and the control: a naive `id > cursor` reader over a bare sequence does, deterministically.
import Foundation
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct CommitOrderTests {
    /// Two appends whose commits land out of the order their positions were taken in.
    /// `bigserial` hands out 1 to the first, 2 to the second; the second commits first, a reader
    /// moves its cursor to 2, and row 1 — committed a moment later — is never read.
    @Test func naiveReaderOverABareSequenceSkipsAnEventCommittedOutOfOrder() throws {
        let url = try TestPostgres.freshDatabase()
        let a = try PGConnection.connect(url), b = try PGConnection.connect(url), reader = try PGConnection.connect(url)
        try a.execute("CREATE TABLE naive_log (id bigserial PRIMARY KEY, body text NOT NULL)")
        var cursor: Int64 = 0
        var read: [Int64] = []
        func poll() throws {
            let r = try reader.execute("SELECT id FROM naive_log WHERE id > $1 ORDER BY id", [String(cursor)])
            for i in 0..<r.rowCount { let id = r.int64(i, 0)!; read.append(id); cursor = id }
        }
        try a.execute("BEGIN")
        try a.execute("INSERT INTO naive_log (body) VALUES ('first')")   // takes id 1, not committed
        try b.execute("INSERT INTO naive_log (body) VALUES ('second')")  // takes id 2, commits
        try poll()
        try a.execute("COMMIT")
        try poll()
        let stored = try reader.execute("SELECT count(*) FROM naive_log").int64(0, 0)
        #expect(stored == 2)
        #expect(read == [2], "the control must skip: id 1 committed after the reader passed it")
    }

    /// The same race on Herald's log: the second append waits for the first's COMMIT (the head
    /// row is locked until then), so positions are commit-ordered and the reader sees 1 then 2.
    @Test func readerFollowingEventPositionsSkipsNothingWhenCommitsRace() throws {
        let url = try TestPostgres.freshDatabase()
        let a = try PGConnection.connect(url), b = try PGConnection.connect(url), reader = try PGConnection.connect(url)
        func appendParameters(_ id: String) -> [String?] {
            ["{u1}", "{submit}", "{com.example.mail}", "{\(id)}", #"{"{\"id\":\"\#(id)\"}"}"#, "{2026-03-27T07:00:00Z}", "{0}"]
        }
        let append = "SELECT * FROM herald_append_events(0, NULL, $1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::integer[])"
        var cursor: Int64 = 0
        var read: [Int64] = []
        func poll() throws {
            for e in try EventReader.events(reader, after: cursor) { read.append(e.seq); cursor = e.seq }
        }
        try a.execute("BEGIN")
        try a.execute(append, appendParameters("first"))      // position 1, not committed
        #expect(b.send(append, appendParameters("second")))  // must wait for a's COMMIT
        try poll()
        #expect(read.isEmpty, "nothing is visible before the first COMMIT")
        try a.execute("COMMIT")
        // b's statement completes now (autocommit); drain its results.
        while true {
            _ = b.consumeInput()
            switch b.nextResult() {
            case .wouldBlock: usleep(1_000); continue
            case .result(let r): #expect(r.error == nil); continue
            case .endOfStatement: break
            }
            break
        }
        try poll()
        #expect(read == [1, 2], "commit-ordered positions: nothing skipped")
    }
}
