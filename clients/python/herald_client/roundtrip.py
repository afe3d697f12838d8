"""The round trip, and the shortest example: register an app, authorize a user, pipeline N submits, read their N deliveries.

Reads HERALD_ADDR (host:port, default 127.0.0.1:7411), HERALD_TOKEN (optional), N (default 1000) and
HERALD_APP (default com.example.roundtrip: a token's apps must list it);
prints `roundtrip: N acked, N delivered` as its last line and exits 0, or prints the error and exits 1.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid

from . import AsyncClient, Authorization, HeraldError, Submit


async def roundtrip(host: str, port: int, token: str | None, n: int, app: str = "com.example.roundtrip") -> tuple[int, int]:
    run = uuid.uuid4().hex[:12]
    user = f"roundtrip-{run}"
    async with await AsyncClient.connect(host, port, token=token) as client:
        await client.register_app(app)
        await client.authorization(Authorization(user=user, app=app, status="authorized", options=["alert", "sound", "badge"]))
        # A fresh consumer starts at the head: subscribe before submitting so it sees every delivery.
        async with await client.subscribe(f"roundtrip-{run}") as subscription:
            futures = [
                await client.send(Submit(id=f"{run}-{i}", app=app, user=user, title=f"Round trip {i}", body="Hello from Python",
                                         hidden_previews_body_placeholder="Round trip"))
                for i in range(n)
            ]
            acks = await asyncio.gather(*futures)
            acked = sum(1 for ack in acks if not ack.duplicate)
            wanted = {f"{run}-{i}" for i in range(n)}
            seen: set[str] = set()
            deadline = time.monotonic() + 60
            while seen != wanted:
                delivery = await subscription.next(timeout=max(0.1, deadline - time.monotonic()))
                if delivery.app == app and delivery.notification in wanted:
                    seen.add(delivery.notification)
        return acked, len(seen)


def main() -> int:
    addr = os.environ.get("HERALD_ADDR", "127.0.0.1:7411")
    host, _, port = addr.rpartition(":")
    token = os.environ.get("HERALD_TOKEN") or None
    n = int(os.environ.get("N", "1000"))
    try:
        app = os.environ.get("HERALD_APP", "com.example.roundtrip")
        acked, delivered = asyncio.run(roundtrip(host or "127.0.0.1", int(port), token, n, app))
    except (HeraldError, OSError, asyncio.TimeoutError) as error:
        print(f"roundtrip failed: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    print(f"roundtrip: {acked} acked, {delivered} delivered")
    return 0 if acked == n and delivered == n else 1


if __name__ == "__main__":
    sys.exit(main())
