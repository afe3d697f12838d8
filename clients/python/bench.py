"""Pipelined acked submits per second on one connection with the asyncio client (a bench, not a test).

Usage: HERALD_ADDR=127.0.0.1:7411 [HERALD_TOKEN=…] [HERALD_APP=com.example.bench] [N=50000] [WINDOW=4096] python3 clients/python/bench.py
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from herald_client import AsyncClient, Authorization, Submit  # noqa: E402


async def bench(host: str, port: int, token: str | None, n: int, window: int) -> float:
    run = uuid.uuid4().hex[:12]
    app, user = os.environ.get("HERALD_APP", "com.example.bench"), f"bench-{run}"
    async with await AsyncClient.connect(host, port, token=token, window=window) as client:
        await client.register_app(app)
        await client.authorization(Authorization(user=user, app=app, status="authorized", options=["alert"]))
        start = time.perf_counter()
        futures = [
            await client.send(Submit(id=f"{run}-{i}", app=app, user=user, title="Bench", hidden_previews_body_placeholder="Bench"))
            for i in range(n)
        ]
        acks = await asyncio.gather(*futures)
        elapsed = time.perf_counter() - start
        assert all(not a.duplicate for a in acks) and [a.seq for a in acks] == sorted(a.seq for a in acks)
        return n / elapsed


def main() -> None:
    host, _, port = os.environ.get("HERALD_ADDR", "127.0.0.1:7411").rpartition(":")
    n = int(os.environ.get("N", "50000"))
    window = int(os.environ.get("WINDOW", "4096"))
    rate = asyncio.run(bench(host or "127.0.0.1", int(port), os.environ.get("HERALD_TOKEN") or None, n, window))
    print(f"python asyncio client: {n} pipelined submits acked on one connection, window {window}: {rate:,.0f}/s")


if __name__ == "__main__":
    main()
