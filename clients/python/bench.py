"""Pipelined acked submits per second on one connection: the asyncio client beside a raw-socket asyncio loop (a bench, not a test).

Usage: HERALD_ADDR=127.0.0.1:7411 [HERALD_TOKEN=…] [HERALD_APP=com.example.bench] [N=50000] [WINDOW=4096] [ROUNDS=3]
       [COLLECT=stream|list|gather] python3 clients/python/bench.py

Each round runs the client, then the raw loop, on fresh connections and fresh users, so that a
noisy host weighs on both alike; the ratio of each round and the medians are what to read. The
raw loop writes pre-encoded submit lines (the same bytes the client sends) on one connection,
at most WINDOW unanswered, and counts replies by their newlines: the most a Python process gets
from one connection without a client. `cpu` is this process's CPU time per submit.

COLLECT is what the producer does with the acks. `stream` (the default): takes each ack as it
comes (checking that none is a duplicate and that seqs rise), holding only the unanswered
futures, as a producer that forwards events does. `list`: keeps every future and awaits them in
order at the end; `gather`: keeps every future and `asyncio.gather`s them. Those two hold N
futures and acks, which the garbage collector walks again and again (and gather adds a done
callback and a turn of the loop a future): costs of the producer's, not the client's.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import statistics
import sys
import time
import uuid
from dataclasses import dataclass

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from herald_client import Ack, AsyncClient, Authorization, Submit  # noqa: E402

_BATCH = 256


@dataclass
class Run:
    rate: float
    cpu_us: float


def _submit(run: str, i: int, app: str, user: str) -> Submit:
    return Submit(id=f"{run}-{i}", app=app, user=user, title="Bench", hidden_previews_body_placeholder="Bench")


async def client_run(host: str, port: int, token: str | None, app: str, user: str, n: int, window: int, collect: str) -> Run:
    run = uuid.uuid4().hex[:12]
    async with await AsyncClient.connect(host, port, token=token, window=window) as client:
        start, cpu = time.perf_counter(), time.process_time()
        if collect == "stream":
            acked, last = 0, 0
            unanswered: collections.deque[asyncio.Future[Ack]] = collections.deque()
            for i in range(n):
                unanswered.append(await client.send(_submit(run, i, app, user)))
                while unanswered and unanswered[0].done():
                    ack = unanswered.popleft().result()
                    assert not ack.duplicate and ack.seq > last
                    acked, last = acked + 1, ack.seq
            while unanswered:
                ack = await unanswered.popleft()
                assert not ack.duplicate and ack.seq > last
                acked, last = acked + 1, ack.seq
            assert acked == n
        else:
            futures = [await client.send(_submit(run, i, app, user)) for i in range(n)]
            acks = await asyncio.gather(*futures) if collect == "gather" else [await f for f in futures]
            assert all(not a.duplicate for a in acks) and [a.seq for a in acks] == sorted(a.seq for a in acks)
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    return Run(n / elapsed, cpu / n * 1e6)


class _RawLoop(asyncio.Protocol):
    """Says hello, then keeps up to `window` of `lines` unanswered; a reply is a newline."""

    def __init__(self, hello: bytes, lines: list[bytes], window: int, done: asyncio.Future[None]) -> None:
        self.hello, self.lines, self.window, self.done = hello, lines, window, done
        self.transport: asyncio.Transport | None = None
        self.said_hello = False
        self.sent = 0
        self.answered = 0
        self.start = 0.0
        self.cpu = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.write(self.hello)

    def data_received(self, data: bytes) -> None:
        if b'"ok":false' in data:
            self._finish(RuntimeError(f"refused: {data[:300]!r}"))
            return
        replies = data.count(b"\n")
        if not self.said_hello:
            self.said_hello = True
            replies -= 1
            self.start, self.cpu = time.perf_counter(), time.process_time()
        self.answered += replies
        if self.answered >= len(self.lines):
            self._finish(None)
        else:
            self._fill()

    def _fill(self) -> None:
        room = min(self.window - (self.sent - self.answered), len(self.lines) - self.sent)
        if room >= _BATCH or (room > 0 and self.sent + room == len(self.lines)):
            assert self.transport is not None
            self.transport.write(b"".join(self.lines[self.sent:self.sent + room]))
            self.sent += room

    def _finish(self, error: BaseException | None) -> None:
        if not self.done.done():
            if error is None:
                self.done.set_result(None)
            else:
                self.done.set_exception(error)

    def connection_lost(self, exc: Exception | None) -> None:
        self._finish(exc or ConnectionResetError("closed before every reply"))


async def raw_run(host: str, port: int, token: str | None, app: str, user: str, n: int, window: int) -> Run:
    run = uuid.uuid4().hex[:12]
    lines = [
        (json.dumps({**_submit(run, i, app, user).to_wire(), "rid": i + 1}, separators=(",", ":"), ensure_ascii=False) + "\n").encode()
        for i in range(n)
    ]
    hello = (json.dumps({"op": "hello", "token": token, "rid": "hello"} if token else {"op": "hello", "rid": "hello"}) + "\n").encode()
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    transport, protocol = await loop.create_connection(lambda: _RawLoop(hello, lines, window, done), host, port)
    try:
        await done
        elapsed, cpu = time.perf_counter() - protocol.start, time.process_time() - protocol.cpu
    finally:
        transport.close()
    return Run(n / elapsed, cpu / n * 1e6)


async def bench(host: str, port: int, token: str | None, n: int, window: int, rounds: int, collect: str) -> None:
    tag = uuid.uuid4().hex[:12]
    app = os.environ.get("HERALD_APP", "com.example.bench")
    users = [f"bench-{tag}-{r}-{kind}" for r in range(rounds) for kind in ("client", "raw")]
    async with await AsyncClient.connect(host, port, token=token) as setup:
        await setup.register_app(app)
        for user in users:
            await setup.authorization(Authorization(user=user, app=app, status="authorized", options=["alert"]))
    print(f"{n} pipelined submits acked on one connection, window {window}, {rounds} rounds (client, then raw), COLLECT={collect}:")
    ratios, clients, raws = [], [], []
    for r in range(rounds):
        c = await client_run(host, port, token, app, f"bench-{tag}-{r}-client", n, window, collect)
        w = await raw_run(host, port, token, app, f"bench-{tag}-{r}-raw", n, window)
        clients.append(c.rate)
        raws.append(w.rate)
        ratios.append(c.rate / w.rate)
        print(f"  round {r + 1}: asyncio client {c.rate:>9,.0f}/s (cpu {c.cpu_us:5.1f} µs/submit)   "
              f"raw loop {w.rate:>9,.0f}/s (cpu {w.cpu_us:5.1f} µs/submit)   ratio {c.rate / w.rate:.2f}")
    print(f"median: asyncio client {statistics.median(clients):,.0f}/s, raw loop {statistics.median(raws):,.0f}/s, "
          f"ratio {statistics.median(ratios):.2f}")


def main() -> None:
    host, _, port = os.environ.get("HERALD_ADDR", "127.0.0.1:7411").rpartition(":")
    n = int(os.environ.get("N", "50000"))
    window = int(os.environ.get("WINDOW", "4096"))
    rounds = int(os.environ.get("ROUNDS", "3"))
    collect = os.environ.get("COLLECT", "stream")
    if collect not in ("stream", "list", "gather"):
        sys.exit(f"COLLECT={collect}: stream, list or gather")
    asyncio.run(bench(host or "127.0.0.1", int(port), os.environ.get("HERALD_TOKEN") or None, n, window, rounds, collect))


if __name__ == "__main__":
    main()
