// Waking the loop from another thread: an eventfd the loop watches.
import CLibEvent
import Glibc

/// Runs a callback on its loop's thread when `fire()` is called from any thread — a test stopping
/// its server, a bench asking for shutdown. The only way into a loop from outside it: libevent's
/// own thread support (`evthread_use_pthreads`) is left off, because with it every event
/// operation on the loop — each reply's `bufferevent_write`, each `event_add` — takes and releases
/// the base's mutex, for wake-ups that happen twice in a service's life. Firing writes to an
/// eventfd (the kernel's counter is the synchronisation); several fires before the loop looks
/// run the callback once.
public final class LoopTrigger {
    /// The eventfd (internal for the tests).
    let fd: Int32
    private var watch: LoopEvent?

    init(loop: EventLoop, _ callback: @escaping () -> Void) {
        let fd = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        precondition(fd >= 0, "eventfd failed (errno \(errno)): the process is out of file descriptors")
        self.fd = fd
        watch = loop.watch(fd: fd, flags: Int32(EV_READ | EV_PERSIST)) { _ in
            var count: UInt64 = 0
            guard read(fd, &count, 8) == 8 else { return }   // another reader drained it first: nothing to do
            callback()
        }
        watch?.arm()
    }

    deinit {
        watch = nil   // the event is freed before its descriptor is closed
        close(fd)
    }

    /// Makes the callback run on the loop's thread, soon; safe from any thread.
    public func fire() {
        var one: UInt64 = 1
        _ = write(fd, &one, 8)
    }
}

extension EventLoop {
    /// A callback another thread can make the loop run (`LoopTrigger.fire()`).
    public func trigger(_ callback: @escaping () -> Void) -> LoopTrigger {
        LoopTrigger(loop: self, callback)
    }
}
