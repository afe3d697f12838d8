# Herald: build with the Swift 6.3 toolchain, run on a slim Debian with libevent, libpq and NATS's C client (the bridge).
FROM swift:6.3-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends libevent-dev libpq-dev libssl-dev libnats-dev pkg-config && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Package.swift ./
COPY Sources Sources
COPY Plugins Plugins
COPY schema schema
COPY Tests Tests
RUN swift build -c release --product herald --static-swift-stdlib && cp .build/release/herald /herald

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends libevent-2.1-7 libevent-pthreads-2.1-7 libevent-openssl-2.1-7 libssl3 libpq5 libnats3.4 tzdata ca-certificates \
    && rm -rf /var/lib/apt/lists/* && useradd --system herald
COPY --from=build /herald /usr/local/bin/herald
USER herald
# glibc keeps 7 freed chunks per size and thread by default; the loop allocates and frees a
# batch's worth of small objects together, and a larger cache keeps them off the allocator's
# slow path (BENCHMARKS.md, "Allocator"). glibc reads tunables only at process start.
ENV GLIBC_TUNABLES=glibc.malloc.tcache_count=4096
EXPOSE 7411
# serve --http: /metrics, /healthz, /readyz (unauthenticated: publish it only to your monitoring).
EXPOSE 9411
# One ping to 127.0.0.1:7411, one pong within 3 s (ping needs no hello and no token). Start-up
# migrates, loads the latest snapshot and folds the events after it before it listens.
HEALTHCHECK --interval=10s --timeout=5s --start-period=120s --retries=3 CMD ["herald", "health"]
# A graceful stop (SIGTERM) finishes the commits in flight, gives connections up to 10 s for their
# last replies and writes a final snapshot: run with `docker run --stop-timeout 90` (compose:
# stop_grace_period), or Docker's default 10 s SIGKILLs it midway.
STOPSIGNAL SIGTERM
ENTRYPOINT ["herald"]
# Never dev mode on a published port: the grants come from a tokens file mounted as a secret
# (docker-compose.yml; or `-v "$PWD/deploy/tokens.json:/run/secrets/herald_tokens:ro"`).
CMD ["serve", "--listen", "0.0.0.0:7411", "--tokens", "/run/secrets/herald_tokens", "--http", "0.0.0.0:9411", "--log-format", "json"]
