// NATS's C client (Debian's libnats-dev) for Swift: the JetStream bridge publishes through it.
#pragma once
#include <nats/nats.h>
