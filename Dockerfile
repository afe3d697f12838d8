# Herald: build with the Swift 6.3 toolchain, run on a slim Debian with libevent and libpq.
FROM swift:6.3-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends libevent-dev libpq-dev libssl-dev pkg-config && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Package.swift ./
COPY Sources Sources
COPY Plugins Plugins
COPY schema schema
COPY Tests Tests
RUN swift build -c release --product herald --static-swift-stdlib && cp .build/release/herald /herald

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends libevent-2.1-7 libevent-pthreads-2.1-7 libevent-openssl-2.1-7 libssl3 libpq5 tzdata ca-certificates \
    && rm -rf /var/lib/apt/lists/* && useradd --system herald
COPY --from=build /herald /usr/local/bin/herald
USER herald
# glibc keeps 7 freed chunks per size and thread by default; the loop allocates and frees a
# batch's worth of small objects together, and a larger cache keeps them off the allocator's
# slow path (BENCHMARKS.md, "Allocator"). glibc reads tunables only at process start.
ENV GLIBC_TUNABLES=glibc.malloc.tcache_count=4096
EXPOSE 7411
ENTRYPOINT ["herald"]
CMD ["serve", "--listen", "0.0.0.0:7411"]
