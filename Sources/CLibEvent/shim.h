// libevent for Swift. The system headers must come before any event2/ header:
// libevent defines _GNU_SOURCE, and without them a target that also imports
// Glibc fails with "'fds_bits' not present in definition of 'fd_set'" (libevent #460).
#pragma once
#include <sys/types.h>
#include <sys/time.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <sys/eventfd.h>   /* LoopTrigger: waking a loop from another thread */
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/util.h>

/// `evtimer_new` is a function-like macro Swift cannot import.
static inline struct event *herald_evtimer_new(struct event_base *base, event_callback_fn cb, void *arg) {
    return event_new(base, -1, 0, cb, arg);
}
/// `evsignal_new` is a function-like macro Swift cannot import.
static inline struct event *herald_evsignal_new(struct event_base *base, int signum, event_callback_fn cb, void *arg) {
    return event_new(base, signum, EV_SIGNAL | EV_PERSIST, cb, arg);
}
