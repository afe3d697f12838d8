"""The admin ops (consumers, delete_consumer, erase) against a real `herald serve`, typed replies and errors."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest
from conftest import ADMIN_TOKEN, PRODUCER_TOKEN, HeraldServer

from herald_client import Authorization, Client, ConsumersReply, ForbiddenError, NotFoundError, Submit

APP = "com.example.allowed"


def prepare(c: Client, user: str, n: int) -> None:
    c.register_app(APP)
    c.authorization(Authorization(user=user, app=APP, status="authorized", options=["alert"]))
    for f in [c.submit(Submit(id=f"{user}-{i}", app=APP, user=user, title="T", hidden_previews_body_placeholder="T")) for i in range(n)]:
        f.result(30)


def members_of(c: Client, consumer: str) -> int | None:
    status = c.consumers().named(consumer)
    return None if status is None else len(status.members)


def wait_for_members(c: Client, consumer: str, count: int, seconds: float = 15) -> int | None:
    deadline = time.monotonic() + seconds
    while members_of(c, consumer) != count and time.monotonic() < deadline:
        time.sleep(0.02)
    return members_of(c, consumer)


def test_consumers_lists_a_durable_consumer_and_delete_consumer_removes_it(server: HeraldServer) -> None:
    with Client.connect(server.host, server.port, token=ADMIN_TOKEN) as c:
        prepare(c, "hana", 3)
        sub = c.subscribe("gateway", "earliest", ack_every=1)
        got = [sub.next(10) for _ in range(3)]
        sub.ack(got[-1])
        deadline = time.monotonic() + 10
        while sub.acked != got[-1].cursor and time.monotonic() < deadline:
            time.sleep(0.02)

        listed = c.consumers()
        assert isinstance(listed, ConsumersReply) and listed.raw["ok"] is True
        status = listed.named("gateway")
        assert status is not None, listed.raw
        assert [(p.partition, p.acked) for p in status.partitions] == [(0, got[-1].cursor)]
        assert status.partitions[0].head >= got[-1].cursor and status.lag == status.partitions[0].lag
        assert len(status.members) == 1 and status.filter is None and status.created_at

        sub.close()
        assert wait_for_members(c, "gateway", 0) == 0
        deleted = c.delete_consumer("gateway")
        assert deleted.consumer == "gateway" and deleted.acked == got[-1].cursor and deleted.closed_connections >= 0
        assert c.consumers().named("gateway") is None
        with pytest.raises(NotFoundError) as refused:
            c.delete_consumer("gateway")
        assert refused.value.code == "unknown_consumer"


def test_erase_is_acknowledged_with_its_events_seq_and_needs_the_admin_role(server: HeraldServer) -> None:
    with Client.connect(server.host, server.port, token=ADMIN_TOKEN) as c:
        prepare(c, "ivan", 2)
        erased = c.erase("ivan")
        assert erased.seq > 0 and erased.raw["ok"] is True
    with Client.connect(server.host, server.port, token=PRODUCER_TOKEN) as p:
        with pytest.raises(ForbiddenError):
            p.erase("ivan")


def test_a_closed_consumer_leaves_its_group_while_a_child_process_started_after_it_runs(server: HeraldServer) -> None:
    """A process the application starts does not inherit the client's sockets (even with `close_fds=False`),
    so a close ends the connection at the server at once and the group hands its partitions over."""
    with Client.connect(server.host, server.port, token=ADMIN_TOKEN) as c:
        prepare(c, "jules", 1)
        sub = c.subscribe("forked", "earliest")
        assert wait_for_members(c, "forked", 1) == 1
        child = subprocess.Popen(["sleep", "30"], close_fds=False)
        try:
            sub.close()
            assert wait_for_members(c, "forked", 0) == 0, "the server still counts the closed consumer's connection"
        finally:
            child.kill()
            child.wait()


def test_a_closed_consumer_leaves_its_group_while_a_process_forked_after_it_runs(server: HeraldServer) -> None:
    """A fork without exec (multiprocessing's default start method on Linux) copies every descriptor, the
    client's sockets included: closing shuts the connection down, so it still ends at the server."""
    with Client.connect(server.host, server.port, token=ADMIN_TOKEN) as c:
        prepare(c, "kira", 1)
        sub = c.subscribe("forked-without-exec", "earliest")
        assert wait_for_members(c, "forked-without-exec", 1) == 1
        child = os.fork()
        if child == 0:
            time.sleep(30)
            os._exit(0)
        try:
            sub.close()
            assert wait_for_members(c, "forked-without-exec", 0) == 0, "the forked process keeps the closed consumer's connection open"
        finally:
            os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)
