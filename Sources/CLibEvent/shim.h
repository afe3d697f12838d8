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
#include <sys/ioctl.h>     /* TIOCOUTQ: a closing connection's unacknowledged bytes */
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/util.h>
#include <event2/http.h>     /* --http: /metrics, /healthz, /readyz */

/// `evtimer_new` is a function-like macro Swift cannot import.
static inline struct event *herald_evtimer_new(struct event_base *base, event_callback_fn cb, void *arg) {
    return event_new(base, -1, 0, cb, arg);
}
/// `evsignal_new` is a function-like macro Swift cannot import.
static inline struct event *herald_evsignal_new(struct event_base *base, int signum, event_callback_fn cb, void *arg) {
    return event_new(base, signum, EV_SIGNAL | EV_PERSIST, cb, arg);
}

/// Bytes a TCP socket's send queue still holds, sent and not yet acknowledged by the peer or not
/// yet sent (its FIN counts one); -1 on error. `ioctl` is variadic: Swift cannot call it.
static inline int herald_unacknowledged_bytes(int fd) {
    int n = 0;
    return ioctl(fd, TIOCOUTQ, &n) == 0 ? n : -1;
}
