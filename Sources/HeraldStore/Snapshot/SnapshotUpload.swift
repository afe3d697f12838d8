// Stores snapshot jobs on a non-blocking connection: begin, parts by binary COPY fed a slice at a time as the socket allows, complete.
import CLibPQ
import HeraldCore

/// A loop-agnostic driver (like `GroupCommitWriter`): it exposes the socket and whether it wants
/// write readiness; the owner calls `socketReadable`/`socketWritable` when libevent says so. One
/// job at a time. A part's COPY data goes to libpq in slices of `sliceBytes`, at most
/// `slicesPerTurn` per callback, each followed by `PQflush`: a multi-MB part never stalls the
/// loop for more than one slice's copy, and while the socket is full the loop serves others
/// until it is writable again.
public final class SnapshotUpload {
    public enum Job: Sendable {
        /// Inserts the `snapshots` row; its id is the outcome.
        case begin(throughSeq: Int64, header: [UInt8])
        case part(snapshotId: Int64, index: Int, users: Int, data: [UInt8])
        /// Marks it complete and deletes every older snapshot, in one statement.
        case complete(snapshotId: Int64, users: Int, parts: Int, bytes: Int)
        /// Deletes an incomplete snapshot (one whose writing failed).
        case abandon(snapshotId: Int64)
    }

    /// The outcome of a job: the new id for `begin`, 0 otherwise.
    public typealias Completion = (Result<Int64, StoreError>) -> Void

    public static let sliceBytes = 64 << 10
    public static let slicesPerTurn = 4

    private enum State {
        case idle
        /// A statement sent; its result (kept) and then the end of its results are awaited.
        case awaitingResult(PGResult?)
        /// The COPY was sent; its COPY_IN result is awaited.
        case awaitingCopyIn
        /// Feeding COPY data: the pieces and how far they went.
        case copying(pieces: [[UInt8]], piece: Int, offset: Int)
        /// CopyDone sent; the COPY's result is awaited.
        case awaitingCopyResult(PGResult?)
    }

    private let connection: PGConnection
    /// The partition whose snapshots this upload writes.
    public var partition = 0
    private var state = State.idle
    private var completion: Completion?
    public private(set) var wantsWrite = false
    public private(set) var failure: StoreError?
    /// Bytes of COPY data handed to libpq (tests and logs).
    public private(set) var copiedBytes = 0

    public init(connection: PGConnection) throws(StoreError) {
        try connection.setNonBlocking()
        self.connection = connection
    }

    public var socket: Int32 { connection.socket }
    public var isIdle: Bool { if case .idle = state { return completion == nil } else { return false } }

    /// Starts `job` (the upload must be idle); `completion` runs once it is stored or failed.
    public func start(_ job: Job, completion: @escaping Completion) {
        precondition(isIdle, "one snapshot job at a time")
        guard failure == nil else { completion(.failure(failure!)); return }
        self.completion = completion
        let sent: Bool
        switch job {
        case .begin(let through, let header):
            sent = connection.send(SnapshotStore.beginSQL, [String(through), String(SnapshotFormat.version), SnapshotStore.hex(header), String(partition)])
            state = .awaitingResult(nil)
        case .part(let id, let index, let users, let data):
            // Simple protocol: COPY starts from it; the SQL holds only a constant.
            sent = connection.sendSimpleQuery(SnapshotStore.copyPartsSQL)
            let (head, tail) = SnapshotStore.copyFraming(snapshotId: id, part: index, users: users, dataCount: data.count)
            pendingCopy = [head, data, tail]
            state = .awaitingCopyIn
        case .complete(let id, let users, let parts, let bytes):
            sent = connection.send(SnapshotStore.completeSQL, [String(id), String(users), String(parts), String(bytes), nil])
            state = .awaitingResult(nil)
        case .abandon(let id):
            sent = connection.send(SnapshotStore.abandonSQL, [String(id)])
            state = .awaitingResult(nil)
        }
        guard sent else { fail(.unavailable(connection.lastErrorMessage)); return }
        flush()
    }

    private var pendingCopy: [[UInt8]] = []

    public func socketWritable() {
        flush()
    }

    public func socketReadable() {
        guard failure == nil else { return }
        guard connection.consumeInput() else { fail(.unavailable(connection.lastErrorMessage)); return }
        drain()
    }

    /// Sends what libpq holds; while copying, then hands it the next slices (a few per call).
    private func flush() {
        guard failure == nil else { return }
        var slices = 0
        while true {
            let r = connection.flush()
            if r < 0 { fail(.unavailable(connection.lastErrorMessage)); return }
            if r == 1 { wantsWrite = true; return }  // the socket is full: wait for writability
            guard case .copying(let pieces, var piece, var offset) = state else { wantsWrite = false; return }
            if slices == Self.slicesPerTurn { wantsWrite = true; return }  // yield to the loop; writable fires again at once
            if piece == pieces.count {
                guard connection.putCopyEnd() else { fail(.unavailable(connection.lastErrorMessage)); return }
                state = .awaitingCopyResult(nil)
                continue
            }
            let bytes = pieces[piece]
            let n = min(Self.sliceBytes, bytes.count - offset)
            let ok = bytes.withUnsafeBytes { connection.putCopyData(UnsafeRawBufferPointer(rebasing: $0[offset..<(offset + n)])) }
            guard ok else { fail(.unavailable(connection.lastErrorMessage)); return }
            copiedBytes += n
            offset += n
            if offset == bytes.count { piece += 1; offset = 0 }
            state = .copying(pieces: pieces, piece: piece, offset: offset)
            slices += 1
        }
    }

    private func drain() {
        while failure == nil {
            switch state {
            case .idle, .copying:
                return
            case .awaitingCopyIn:
                switch connection.nextResult() {
                case .wouldBlock: return
                case .endOfStatement: finish(.failure(.unavailable("the COPY of a snapshot part ended before it started")))
                case .result(let r):
                    if r.status == PGRES_COPY_IN {
                        state = .copying(pieces: pendingCopy, piece: 0, offset: 0)
                        pendingCopy = []
                        flush()
                    } else {
                        state = .awaitingResult(r)  // an error: its end follows
                    }
                }
            case .awaitingResult(let kept), .awaitingCopyResult(let kept):
                switch connection.nextResult() {
                case .wouldBlock: return
                case .result(let r):
                    if case .awaitingCopyResult = state { state = .awaitingCopyResult(kept ?? r) } else { state = .awaitingResult(kept ?? r) }
                case .endOfStatement:
                    guard let r = kept else { finish(.failure(.unavailable(connection.lastErrorMessage))); break }
                    if let error = r.error { finish(.failure(error)) } else { finish(.success(r.rowCount > 0 ? r.int64(0, 0) ?? 0 : 0)) }
                }
            }
        }
    }

    private func finish(_ result: Result<Int64, StoreError>) {
        state = .idle
        pendingCopy = []
        let done = completion
        completion = nil
        done?(result)
    }

    private func fail(_ error: StoreError) {
        failure = error
        wantsWrite = false
        state = .idle
        pendingCopy = []
        let done = completion
        completion = nil
        done?(.failure(error))
    }

    /// Closes the connection (an unfinished snapshot stays incomplete: never read, deleted by the next completion).
    public func close() { connection.close() }
}
