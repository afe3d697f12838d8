"""PgQueuer under Herald's peer workload: enqueue N jobs due at one instant, process each when due.

Enqueue: batches of --batch jobs per INSERT (PgQueuer's batch enqueue, one transaction each, on one
asyncpg connection), all with execute_after = the due instant. Then one QueueManager worker
(dequeue batch_size --worker-batch) processes them; each job's latency is processing time minus the
due instant. Prints {"name", "enqueuePerSecond", "p50Ms", "p99Ms", "maxMs", "processed", "note"}.
"""
import argparse
import asyncio
import json
import sys
import time
from datetime import timedelta

import asyncpg
from pgqueuer.core.qm import QueueManager
from pgqueuer.queries import Queries


def libpq_kwargs(dsn: str) -> dict:
    """A libpq key=value string (as herald resolves its private cluster) to asyncpg.connect arguments."""
    if dsn.startswith("postgres://") or dsn.startswith("postgresql://"):
        return {"dsn": dsn}
    names = {"host": "host", "port": "port", "user": "user", "dbname": "database", "password": "password"}
    out = {}
    for part in dsn.split():
        k, _, v = part.partition("=")
        if k in names:
            out[names[k]] = int(v) if k == "port" else v
    return out


def pct(sorted_values, p):
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * p))] if sorted_values else 0.0


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dsn", required=True)
    ap.add_argument("--jobs", type=int, default=20000)
    ap.add_argument("--lead-seconds", type=float, default=10.0)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--worker-batch", type=int, default=100)
    a = ap.parse_args()
    kw = libpq_kwargs(a.dsn)

    setup = await asyncpg.connect(**kw)
    q = Queries.from_asyncpg_connection(setup)
    try:
        await q.install()
    except Exception as e:  # already installed in this database
        print(f"bench-peer: install: {e}", file=sys.stderr)
    await setup.close()

    start = time.time()
    due = start + a.lead_seconds
    enq_conn = await asyncpg.connect(**kw)
    enq = Queries.from_asyncpg_connection(enq_conn)
    t0 = time.perf_counter()
    done = 0
    while done < a.jobs:
        n = min(a.batch, a.jobs - done)
        after = timedelta(seconds=max(0.0, due - time.time()))
        await enq.enqueue(["job"] * n, [str(done + i).encode() for i in range(n)], [0] * n, [after] * n)
        done += n
    enqueue_seconds = time.perf_counter() - t0
    if time.time() > due:
        print("bench-peer: warning: enqueue finished after the due instant; raise --lead-seconds", file=sys.stderr)
    print(f"bench-peer: PgQueuer enqueued {a.jobs} jobs in {enqueue_seconds:.2f} s; due in {due - time.time():.1f} s", file=sys.stderr)

    latencies = []
    worker_conn = await asyncpg.connect(**kw)
    qm = QueueManager(Queries.from_asyncpg_connection(worker_conn))

    @qm.entrypoint("job")
    async def job(_job) -> None:
        latencies.append((time.time() - due) * 1000)
        if len(latencies) >= a.jobs:
            qm.shutdown.set()

    await qm.run(batch_size=a.worker_batch, dequeue_timeout=timedelta(seconds=1))
    await worker_conn.close()
    await enq_conn.close()
    latencies.sort()
    print(json.dumps({
        "name": "PgQueuer 1.6.0",
        "enqueuePerSecond": a.jobs / enqueue_seconds,
        "p50Ms": pct(latencies, 0.5), "p99Ms": pct(latencies, 0.99), "maxMs": latencies[-1] if latencies else 0.0,
        "processed": len(latencies),
        "note": f"batches of {a.batch} per INSERT on one asyncpg connection; worker batch {a.worker_batch}",
    }))


if __name__ == "__main__":
    asyncio.run(main())
