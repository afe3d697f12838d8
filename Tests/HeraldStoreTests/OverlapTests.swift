// The writer starts the next COPY transaction before it runs the completions of the one that just
// committed, against a real PostgreSQL: order, positions and failures stay as if it had not.
import Foundation
import HeraldCore
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct OverlapTests {
    /// A writer whose set-up segment has been answered, so the next append goes out alone. These
    /// batches are small: overlap them whatever their size (`completeFirstUpToEvents` 0), as the
    /// writer does with large ones.
    static func readyWriter(_ url: String, completeFirstUpTo: Int = 0) throws -> GroupCommitWriter {
        let writer = try CopyAppendTests.writer(url, completeFirstUpTo: completeFirstUpTo)
        #expect(writer.runUntilIdle())
        return writer
    }

    @Test func aSmallCommittedBatchCompletesBeforeTheNextIsSentSoWhatItsCompletionsAppendRidesInIt() throws {
        // Light load: A (3 events) commits while B waits. A's completions run first and append the
        // deliveries they decided (in `afterCompletions`, once for the batch); B is sent after
        // them, with those deliveries in the same transaction — one commit sooner than if B had gone first.
        let url = try TestPostgres.freshDatabase()
        let writer = try Self.readyWriter(url, completeFirstUpTo: 32)
        var heard: [String] = []
        var decided: [DeliveryRow] = []
        writer.afterCompletions = {
            heard.append("after completions (\(decided.count) decided)")
            guard !decided.isEmpty else { return }
            writer.append(deliveries: decided) { heard.append("D \(String(describing: try? $0.get()))") }
            decided.removeAll()
        }
        writer.append(events: (1...3).map { CopyAppendTests.event($0) }) { result in
            heard.append("A \((try? result.get())?.count ?? -1)")
            #expect(writer.pendingTransactions == 0 && writer.queuedWork == 1, "B waits until A's completions ran")
            decided = (1...3).map { CopyAppendTests.delivery(Int64($0)) }
        }
        writer.append(events: (4...5).map { CopyAppendTests.event($0) }) { heard.append("B \((try? $0.get())?.count ?? -1)") }
        let committedBefore = writer.transactionsCommitted
        #expect(writer.runUntilIdle())
        #expect(heard == ["A 3", "after completions (3 decided)", "B 2", "D \(String(describing: Optional([Int64(1), 2, 3])))",
                          "after completions (0 decided)"])
        #expect(writer.transactionsCommitted - committedBefore == 2, "A, then B with A's deliveries")
        #expect(writer.transactionsOverlapped == 0)
        let conn = try PGConnection.connect(url)
        #expect(try conn.execute("SELECT count(DISTINCT xmin::text) FROM events WHERE seq > 3").int64(0, 0) == 1)
        #expect(try conn.execute("SELECT count(*) FROM deliveries d JOIN events e ON e.seq = 4 AND d.xmin = e.xmin").int64(0, 0) == 3,
                "A's deliveries committed with B's events")
    }

    @Test func aLargeCommittedBatchStillOverlapsTheNextOne() throws {
        // Above `completeFirstUpToEvents` the next transaction goes first, as before.
        let url = try TestPostgres.freshDatabase()
        let writer = try Self.readyWriter(url, completeFirstUpTo: 2)
        var heard: [String] = []
        writer.append(events: (1...3).map { CopyAppendTests.event($0) }) { _ in
            heard.append("A")
            #expect(writer.pendingTransactions == 1, "B started before A's completion ran")
        }
        writer.append(events: (4...5).map { CopyAppendTests.event($0) }) { _ in heard.append("B") }
        #expect(writer.runUntilIdle())
        #expect(heard == ["A", "B"])
        #expect(writer.transactionsOverlapped == 1)
    }

    @Test func theNextQueuedBatchIsStoredWhileTheCommittedOnesCompletionsWait() throws {
        let url = try TestPostgres.freshDatabase()
        let writer = try Self.readyWriter(url)
        var heard: [String] = []
        writer.append(events: (1...3).map { CopyAppendTests.event($0) }) { result in
            heard.append("A \(String(describing: try? result.get()))")
            // B was queued while A ran: it is on the wire (in flight), not waiting behind this completion.
            #expect(writer.pendingTransactions == 1 && writer.queuedWork == 0, "B started before A's completion ran")
            // An append made here joins the transaction after B.
            writer.append(events: [CopyAppendTests.event(9)]) { heard.append("C \(String(describing: try? $0.get()))") }
        }
        #expect(writer.pendingTransactions == 1, "A is alone in flight")
        writer.append(events: (4...5).map { CopyAppendTests.event($0) }) { heard.append("B \(String(describing: try? $0.get()))") }
        #expect(writer.queuedWork == 1, "B waits for A")
        #expect(writer.runUntilIdle())
        #expect(heard == [
            "A \(String(describing: Optional([AppendOutcome.appended(seq: 1), .appended(seq: 2), .appended(seq: 3)])))",
            "B \(String(describing: Optional([AppendOutcome.appended(seq: 4), .appended(seq: 5)])))",
            "C \(String(describing: Optional([AppendOutcome.appended(seq: 6)])))",
        ], "completions in commit order, positions gap-free")
        #expect(writer.transactionsOverlapped >= 1)
        let stored = try EventReader.events(PGConnection.connect(url), after: 0)
        #expect(stored.map(\.seq) == [1, 2, 3, 4, 5, 6])
        #expect(stored.map(\.row.notificationId) == ["n1", "n2", "n3", "n4", "n5", "n9"])
    }

    /// Queues the work for three transactions: X (one event) goes out at once; `count` one-event
    /// appends (A) wait behind it; X's completion appends B (`bEvents`), which waits behind A. So
    /// A's `count` completions run while B is the transaction in flight. `duringA` runs in each of
    /// A's completions with its index.
    static func threeTransactions(_ writer: GroupCommitWriter, count: Int, bEvents: ClosedRange<Int>,
                                  heard: @escaping (String) -> Void, duringA: @escaping (Int) -> Void) {
        writer.append(events: [CopyAppendTests.event(0)]) { _ in
            writer.append(events: bEvents.map { CopyAppendTests.event($0) }) { result in
                heard("B \((try? result.get()) == nil ? "failed" : "ok")")
            }
        }
        for i in 1...count {
            writer.append(events: [CopyAppendTests.event(i)]) { result in
                heard("A\(i) \((try? result.get()) == nil ? "failed" : "ok")")
                duringA(i)
            }
        }
    }

    @Test func theNextBatchsCopyDataIsSentBetweenTheCommittedOnesCompletions() throws {
        // PostgreSQL asks for B's rows (COPY_IN) while A's 64 completions run: the writer looks at
        // the socket every `pollEveryCompletions` of them and sends the rows then, instead of
        // after the last one, so B is stored while A completes.
        let url = try TestPostgres.freshDatabase()
        let writer = try Self.readyWriter(url)
        var heard: [String] = []
        var pendingSeen: [Int] = []
        Self.threeTransactions(writer, count: 64, bEvents: 100...101, heard: { heard.append($0) }) { i in
            // PostgreSQL's answer to B's start is on the socket before the first look at it.
            if i == 1 { _ = PGPoll.wait(socket: writer.socket, read: true, write: false, timeoutMilliseconds: 5_000) }
            pendingSeen.append(writer.pendingTransactions)
        }
        #expect(writer.runUntilIdle())
        #expect(writer.copiesSentWhileCompleting == 1, "B's rows went out during A's completions")
        #expect(pendingSeen == Array(repeating: 1, count: 64), "B is in flight, and does not finish, while A completes")
        #expect(heard == (1...64).map { "A\($0) ok" } + ["B ok"], "completions in commit order")
        let stored = try EventReader.events(PGConnection.connect(url), after: 0)
        #expect(stored.map(\.seq) == Array(1...67).map(Int64.init), "positions gap-free")
        #expect(stored.suffix(2).map(\.row.notificationId) == ["n100", "n101"])
    }

    @Test func aConnectionCutWhileSendingTheNextBatchBetweenCompletionsFailsItAfterThemAll() throws {
        // B's rows go out between A's completions and the connection is cut right after (B's COMMIT
        // flushed). Every A waiter still hears success first; then B hears the failure.
        let url = try TestPostgres.freshDatabase()
        let writer = try Self.readyWriter(url)
        writer.commitFlushedForTesting = { _, eventRows in eventRows == 2 }   // B only
        var heard: [String] = []
        Self.threeTransactions(writer, count: 64, bEvents: 100...101, heard: { heard.append($0) }) { i in
            if i == 1 { _ = PGPoll.wait(socket: writer.socket, read: true, write: false, timeoutMilliseconds: 5_000) }
            #expect(writer.failure == nil, "the failure waits until A's completions ran")
        }
        writer.runUntilIdle(timeoutMilliseconds: 10_000)
        #expect(writer.copiesSentWhileCompleting == 1)
        #expect(heard == (1...64).map { "A\($0) ok" } + ["B failed"])
        #expect(writer.failure != nil)
        let stored = try EventReader.events(PGConnection.connect(url), after: 0)
        #expect(stored.prefix(65).map(\.seq) == Array(1...65).map(Int64.init), "X and A are stored whatever became of B")
    }

    @Test func deliveriesAloneOverlapTheSameWay() throws {
        let url = try TestPostgres.freshDatabase()
        let writer = try Self.readyWriter(url)
        var heard: [[Int64]] = []
        writer.append(deliveries: (1...4).map { CopyAppendTests.delivery($0) }) { result in
            heard.append((try? result.get()) ?? [])
            #expect(writer.pendingTransactions == 1, "the second batch started before this completion ran")
        }
        writer.append(deliveries: (5...6).map { CopyAppendTests.delivery($0) }) { heard.append((try? $0.get()) ?? []) }
        #expect(writer.runUntilIdle())
        #expect(heard == [[1, 2, 3, 4], [5, 6]])
        #expect(writer.transactionsOverlapped == 1)
        #expect(writer.deliveriesCopied == 6)
    }

    @Test func aBatchCommittedBeforeTheConnectionBrokeIsStillReportedCommittedAndFirst() throws {
        // A commits; B is started (its COMMIT flushed) and the connection is cut before B's answer.
        // A's waiters hear success, then B's hear the error (B's outcome is unknown to the writer).
        let url = try TestPostgres.freshDatabase()
        let writer = try Self.readyWriter(url)
        writer.commitFlushedForTesting = { _, eventRows in eventRows == 2 }   // B only: cut after its COMMIT
        var heard: [String] = []
        writer.append(events: (1...3).map { CopyAppendTests.event($0) }) { result in
            switch result {
            case .success(let o): heard.append("A ok \(o.count)")
            case .failure: heard.append("A failed")
            }
        }
        writer.append(events: (4...5).map { CopyAppendTests.event($0) }) { result in
            switch result {
            case .success: heard.append("B ok")
            case .failure: heard.append("B failed")
            }
        }
        writer.runUntilIdle(timeoutMilliseconds: 10_000)
        #expect(heard == ["A ok 3", "B failed"])
        #expect(writer.failure != nil)
        let stored = try EventReader.events(PGConnection.connect(url), after: 0)
        #expect(stored.prefix(3).map(\.seq) == [1, 2, 3], "A is stored whatever became of B")
    }

    @Test func aDuplicateInTheOverlappedBatchStillFallsBackAfterTheCommittedCompletions() throws {
        // B re-sends a stored id: its COPY fails and B goes again through the function. A's
        // completions still come first, and B hears the duplicate with the original seq.
        let url = try TestPostgres.freshDatabase()
        let writer = try Self.readyWriter(url)
        var heard: [String] = []
        writer.append(events: [CopyAppendTests.event(1), CopyAppendTests.event(2)]) { heard.append("A \((try? $0.get())?.count ?? -1)") }
        writer.append(events: [CopyAppendTests.event(1), CopyAppendTests.event(3)]) { result in
            heard.append("B \(String(describing: try? result.get()))")
        }
        #expect(writer.runUntilIdle())
        #expect(heard == ["A 2", "B \(String(describing: Optional([AppendOutcome.duplicate(seq: 1), .appended(seq: 3)])))"])
        let stored = try EventReader.events(PGConnection.connect(url), after: 0)
        #expect(stored.map(\.seq) == [1, 2, 3])
    }

    @Test func aFailedDeliveryTransactionFailsTheDeliveriesQueuedBehindIt() throws {
        // Deliveries are one ordered stream: when a batch of them fails (a NUL byte here, refused by
        // the protocol), the delivery batches queued behind it fail too, so none commits ahead of
        // rows the service will send again. Events queued behind it are not affected.
        let url = try TestPostgres.freshDatabase()
        var limits = GroupCommitWriter.Limits()
        limits.maxRowsPerTransaction = 1   // one append per transaction
        let writer = try GroupCommitWriter(connection: PGConnection.connect(url), limits: limits)
        #expect(writer.runUntilIdle())
        var heard: [String] = []
        func outcome<T>(_ name: String) -> (Result<T, StoreError>) -> Void {
            { result in heard.append("\(name) \((try? result.get()) == nil ? "failed" : "ok")") }
        }
        writer.append(events: [CopyAppendTests.event(1)], completion: outcome("E1"))   // in flight
        var bad = CopyAppendTests.delivery(1)
        bad.bodyBytes = Array("{\"kind\":\"x\u{0}y\"}".utf8)
        writer.append(deliveries: [bad], completion: outcome("D1"))                   // queued, fails
        #expect(writer.runUntilIdle())
        writer.append(events: [CopyAppendTests.event(2)], completion: outcome("E2"))   // in flight
        writer.append(deliveries: [bad], completion: outcome("D2"))
        writer.append(deliveries: [CopyAppendTests.delivery(2)], completion: outcome("D3"))
        writer.append(events: [CopyAppendTests.event(3)], completion: outcome("E3"))
        #expect(writer.runUntilIdle())
        #expect(heard == ["E1 ok", "D1 failed", "E2 ok", "D2 failed", "D3 failed", "E3 ok"])
        #expect(writer.failure == nil, "the writer stays usable")
        let conn = try PGConnection.connect(url)
        #expect(try conn.execute("SELECT count(*) FROM deliveries").int64(0, 0) == 0, "nothing committed ahead of the failed batch")
        writer.append(deliveries: [CopyAppendTests.delivery(1)], completion: outcome("D4"))
        #expect(writer.runUntilIdle())
        #expect(heard.last == "D4 ok")
    }
}
