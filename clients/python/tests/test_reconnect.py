"""A server killed mid-stream (kill -9) or stopped (SIGTERM): the clients reconnect, resubmit and resume."""

from __future__ import annotations

import threading
import time
from collections import Counter
from concurrent.futures import Future

from conftest import ADMIN_TOKEN, HeraldServer

from herald_client import Ack, Authorization, Backoff, Client, Submit

APP = "com.example.resend"


def produce_through_a_restart(server: HeraldServer, prefix: str, n: int, stop: str) -> list[Ack]:
    with Client.connect(server.host, server.port, token=ADMIN_TOKEN, window=256, backoff=Backoff(0.05, 0.5)) as c:
        c.register_app(APP)
        c.authorization(Authorization(user="hank", app=APP, status="authorized", options=["alert"]))
        futures: list[Future[Ack]] = []

        def produce() -> None:
            for i in range(n):
                futures.append(c.submit(Submit(id=f"{prefix}-{i}", app=APP, user="hank", title="Resend",
                                               hidden_previews_body_placeholder="Resend")))

        producer = threading.Thread(target=produce)
        producer.start()
        while len(futures) < n // 3 or not futures[n // 4].done():
            time.sleep(0.001)
        if stop == "kill":
            server.kill9()
        else:
            assert server.process is not None
            server.process.terminate()
            server.process.wait(30)
        server.start()
        producer.join(120)
        acks = [f.result(120) for f in futures]
        assert c.reconnects >= 1
        return acks


def check_exactly_once(server: HeraldServer, acks: list[Ack], prefix: str, n: int) -> None:
    assert len(acks) == n
    seqs = [a.seq for a in acks]
    assert len(set(seqs)) == n, "two submits share a seq"
    # What was committed before the crash and resent comes back duplicate, with its original seq.
    assert seqs == sorted(seqs)
    with Client.connect(server.host, server.port, token=ADMIN_TOKEN) as c:
        sub = c.subscribe(f"check-{prefix}", from_="earliest")
        counts: Counter[str] = Counter()
        while sum(counts.values()) < n:
            d = sub.next(30)
            if d.app == APP and d.notification and d.notification.startswith(prefix + "-"):
                counts[d.notification] += 1
        sub.close()
    assert set(counts) == {f"{prefix}-{i}" for i in range(n)} and set(counts.values()) == {1}


def test_kill_9_mid_stream_every_submit_ends_acked_exactly_once(server: HeraldServer) -> None:
    acks = produce_through_a_restart(server, "kill", 6000, "kill")
    print("duplicates after kill -9:", sum(a.duplicate for a in acks))
    check_exactly_once(server, acks, "kill", 6000)


def test_a_stopped_server_goodbye_and_close_is_a_reconnect(server: HeraldServer) -> None:
    acks = produce_through_a_restart(server, "term", 6000, "term")
    print("duplicates after SIGTERM:", sum(a.duplicate for a in acks))
    check_exactly_once(server, acks, "term", 6000)


def test_a_consumer_resumes_through_a_kill_9(server: HeraldServer) -> None:
    with Client.connect(server.host, server.port, token=ADMIN_TOKEN, backoff=Backoff(0.05, 0.5)) as c:
        c.register_app(APP)
        c.authorization(Authorization(user="iris", app=APP, status="authorized", options=["alert"]))
        sub = c.subscribe("resume-through-kill", ack_every=10)
        for f in [c.submit(Submit(id=f"iris-{i}", app=APP, user="iris", title="I", hidden_previews_body_placeholder="I"))
                  for i in range(200)]:
            f.result(30)
        got = [sub.next(30) for _ in range(100)]
        server.kill9()
        server.start()
        got += [sub.next(60) for _ in range(100)]
        sub.close()
    assert [d.notification for d in got] == [f"iris-{i}" for i in range(200)]
