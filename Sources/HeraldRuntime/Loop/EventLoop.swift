// The process's one libevent loop, and events (timers, sockets, signals) with Swift closures.
import CLibEvent
import Glibc

/// One `event_base`. Everything runs on the thread that calls `run()`: connections, the
/// store's socket, timers and signals. Nothing on it may block. Other threads reach it only
/// through a `LoopTrigger`: libevent's locking is off (see there).
public final class EventLoop {
    /// Owned: created in init, freed in deinit after every `LoopEvent` of this loop is gone.
    let base: OpaquePointer

    public init() {
        // Precise timers (timerfd on Linux): the wheel's one timer fires within a millisecond, not a jiffy.
        let config = event_config_new()
        event_config_set_flag(config, Int32(EVENT_BASE_FLAG_PRECISE_TIMER.rawValue))
        defer { event_config_free(config) }
        guard let base = event_base_new_with_config(config) else { fatalError("libevent could not create an event base (out of memory)") }
        self.base = base
    }

    deinit { event_base_free(base) }

    /// Runs until `stop()` or until nothing is armed.
    public func run() { event_base_dispatch(base) }

    /// Runs one iteration without blocking (tests drive the loop this way).
    public func runOnce(block: Bool = false) {
        event_base_loop(base, block ? EVLOOP_ONCE : EVLOOP_NONBLOCK)
    }

    /// Makes `run()` return after the current iteration.
    public func stop() { event_base_loopbreak(base) }

    /// A one-shot or periodic timer.
    public func timer(_ callback: @escaping () -> Void) -> LoopEvent {
        LoopEvent(loop: self, fd: -1, flags: 0) { _ in callback() }
    }

    /// Watches a file descriptor; `flags` is a mask of EV_READ / EV_WRITE, with EV_PERSIST to stay armed.
    public func watch(fd: Int32, flags: Int32, _ callback: @escaping (Int16) -> Void) -> LoopEvent {
        LoopEvent(loop: self, fd: fd, flags: Int16(flags), callback)
    }

    /// Calls `callback` on the loop each time the signal arrives.
    public func signal(_ number: Int32, _ callback: @escaping () -> Void) -> LoopEvent {
        LoopEvent(loop: self, fd: number, flags: Int16(EV_SIGNAL | EV_PERSIST)) { _ in callback() }
    }
}

/// A libevent `event` calling a Swift closure. The object owns the event: the event is freed in
/// deinit, so the context pointer handed to libevent (this object, unretained) never outlives it.
public final class LoopEvent {
    private var event: OpaquePointer?
    private let callback: (Int16) -> Void
    /// Strong: the event_base must outlive every event created on it (freed in this deinit).
    private let loop: EventLoop

    init(loop: EventLoop, fd: Int32, flags: Int16, _ callback: @escaping (Int16) -> Void) {
        self.callback = callback
        self.loop = loop
        // Unretained: whoever holds this LoopEvent keeps it (and so the context) alive while armed.
        let context = Unmanaged.passUnretained(self).toOpaque()
        event = event_new(loop.base, fd, flags, { _, what, context in
            Unmanaged<LoopEvent>.fromOpaque(context!).takeUnretainedValue().callback(what)
        }, context)
    }

    deinit {
        if let event { event_free(event) }
    }

    /// Arms the event; with a timeout in milliseconds it fires after that long (timers) or on timeout.
    public func arm(afterMilliseconds ms: Int64? = nil) {
        guard let event else { return }
        if let ms {
            var tv = timeval(tv_sec: Int(ms / 1000), tv_usec: Int((ms % 1000) * 1000))
            event_add(event, &tv)
        } else {
            event_add(event, nil)
        }
    }

    public func disarm() {
        if let event { event_del(event) }
    }

    public var isArmed: Bool {
        guard let event else { return false }
        return event_pending(event, Int16(EV_TIMEOUT | EV_READ | EV_WRITE | EV_SIGNAL), nil) != 0
    }
}
