// LoopTrigger: the one way into a loop from another thread, with libevent's locking off.
import Foundation
@testable import HeraldRuntime
import Testing

@Suite struct LoopTriggerTests {
    /// Fired from another thread while the loop waits in `run()`: the callback runs on the loop's
    /// thread and can stop it — how a test or a bench stops its server (`requestShutdown`).
    @Test func aFireFromAnotherThreadWakesTheLoopAndRunsOnItsThread() throws {
        let loop = EventLoop()
        let seen = ThreadsSeen()
        let trigger = loop.trigger {
            seen.callback = pthread_self()
            loop.stop()
        }
        let finished = DispatchSemaphore(value: 0)
        // The loop is used only by its thread from here on; the test thread only fires.
        nonisolated(unsafe) let running = loop
        let thread = Thread {
            seen.loop = pthread_self()
            running.run()
            finished.signal()
        }
        thread.start()
        Thread.sleep(forTimeInterval: 0.05)   // the loop is waiting for events (no schedule is involved)
        trigger.fire()
        #expect(finished.wait(timeout: .now() + 10) == .success, "the loop did not wake up")
        #expect(seen.callback != nil && seen.callback == seen.loop)
    }

    /// Several fires before the loop looks run the callback once; a later fire runs it again.
    @Test func firesBeforeTheLoopLooksRunTheCallbackOnce() {
        let loop = EventLoop()
        var runs = 0
        let trigger = loop.trigger { runs += 1 }
        for _ in 0..<5 { trigger.fire() }
        loop.runOnce()
        #expect(runs == 1)
        loop.runOnce()
        #expect(runs == 1)
        trigger.fire()
        loop.runOnce()
        #expect(runs == 2)
    }

    /// A freed trigger leaves nothing armed: its eventfd, made readable afterwards (through a
    /// duplicate, which keeps the file open whatever the process's other threads do with
    /// descriptor numbers), runs nothing, and the loop turns on. (Counting the process's open
    /// descriptors instead raced with the tests that run beside this one.)
    @Test func aFreedTriggerIsNoLongerWatched() {
        let loop = EventLoop()
        var runs = 0
        var trigger: LoopTrigger? = loop.trigger { runs += 1 }
        let duplicate = dup(trigger!.fd)
        defer { close(duplicate) }
        trigger?.fire()
        trigger = nil
        var one: UInt64 = 1
        #expect(write(duplicate, &one, 8) == 8)
        loop.runOnce()
        #expect(runs == 0)
    }

    /// Written by the loop's thread, read after it finished (the semaphore orders them).
    private final class ThreadsSeen: @unchecked Sendable {
        var loop: pthread_t?
        var callback: pthread_t?
    }
}
