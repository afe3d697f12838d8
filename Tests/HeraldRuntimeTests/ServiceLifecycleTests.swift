// A graceful stop's steps, decided without I/O: commits finish, connections close and drain, the snapshot, the stop.
@testable import HeraldRuntime
import Testing

@Suite struct ServiceLifecycleTests {
    typealias Step = ServiceLifecycle.ShutdownStep

    @Test func aStopBeginsOnceAndOnlyFromServing() {
        var l = ServiceLifecycle.serving
        #expect(l.isServing)
        let began = l.shutdownRequested()
        #expect(began && !l.isServing && l == .finishingCommits)
        let beganAgain = l.shutdownRequested()
        #expect(!beganAgain)
        #expect(l == .finishingCommits)
    }

    @Test func whileServingADrainCheckDoesNothing() {
        var l = ServiceLifecycle.serving
        #expect(l.drainChecked(idle: true, writersReady: true, storeReady: true, openConnections: 0, now: 0) == nil)
        #expect(l == .serving)
    }

    @Test func commitsInFlightAreWaitedForWhileTheStoreIsUp() {
        var l = ServiceLifecycle.finishingCommits
        #expect(l.drainChecked(idle: false, writersReady: true, storeReady: true, openConnections: 3, now: 5) == .checkAgain(afterMilliseconds: 10))
        #expect(l == .finishingCommits)
    }

    @Test func withoutTheStoreCommitsAreNotWaitedFor() {
        var l = ServiceLifecycle.finishingCommits
        #expect(l.drainChecked(idle: false, writersReady: false, storeReady: false, openConnections: 0, now: 7) == .closeConnections)
        #expect(l == .closingConnections(since: 7))
        // Nothing to snapshot through: the loop stops.
        #expect(l.drainChecked(idle: false, writersReady: false, storeReady: false, openConnections: 0, now: 7) == .stop)
        #expect(l == .stopped)
    }

    @Test func closedConnectionsGetTheDrainTimeToSendTheirLastReplies() {
        var l = ServiceLifecycle.finishingCommits
        #expect(l.drainChecked(idle: true, writersReady: true, storeReady: true, openConnections: 2, now: 100) == .closeConnections)
        #expect(l.drainChecked(idle: true, writersReady: true, storeReady: true, openConnections: 2, now: 100) == .checkAgain(afterMilliseconds: 10))
        #expect(l.drainChecked(idle: true, writersReady: true, storeReady: true, openConnections: 1, now: 100 + 9_999) == .checkAgain(afterMilliseconds: 10))
        // A client that does not read its replies is let go after the drain time.
        #expect(l.drainChecked(idle: true, writersReady: true, storeReady: true, openConnections: 1, now: 100 + 10_000) == .writeFinalSnapshot)
        #expect(l == .closingConnections(since: 100))
    }

    @Test func theFinalSnapshotIsWrittenASliceAtATimeThenTheLoopStops() {
        var l = ServiceLifecycle.finishingCommits
        #expect(l.drainChecked(idle: true, writersReady: true, storeReady: true, openConnections: 0, now: 0) == .closeConnections)
        #expect(l.drainChecked(idle: true, writersReady: true, storeReady: true, openConnections: 0, now: 0) == .writeFinalSnapshot)
        #expect(l.finalSnapshotStepped(moreToDo: true) == .checkAgain(afterMilliseconds: 5))
        #expect(l.drainChecked(idle: true, writersReady: true, storeReady: true, openConnections: 0, now: 5) == .writeFinalSnapshot)
        #expect(l.finalSnapshotStepped(moreToDo: false) == .stop)
        #expect(l == .stopped && !l.isServing)
        #expect(l.drainChecked(idle: true, writersReady: true, storeReady: true, openConnections: 0, now: 10) == nil)
    }

    @Test func workDecidedWhileConnectionsDrainIsWaitedFor() {
        var l = ServiceLifecycle.closingConnections(since: 0)
        #expect(l.drainChecked(idle: false, writersReady: true, storeReady: true, openConnections: 0, now: 20_000) == .checkAgain(afterMilliseconds: 10))
        #expect(l == .closingConnections(since: 0))
    }
}
