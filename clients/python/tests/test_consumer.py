"""Consumers iterate typed deliveries, ack in batches and resume after their last ack with nothing skipped."""

from __future__ import annotations

import asyncio


from conftest import ADMIN_TOKEN, HeraldServer

from herald_client import AsyncClient, Authorization, Client, Delivery, Submit

APP = "com.example.consumer"


def submit_many(c: Client, user: str, prefix: str, n: int) -> None:
    futures = [c.submit(Submit(id=f"{prefix}-{i}", app=APP, user=user, title=f"Item {i}", body="Body",
                               hidden_previews_body_placeholder="Item")) for i in range(n)]
    for f in futures:
        f.result(60)


def test_a_consumer_resumes_after_its_last_ack_with_nothing_skipped(server: HeraldServer) -> None:
    with Client.connect(server.host, server.port, token=ADMIN_TOKEN) as c:
        c.register_app(APP)
        c.authorization(Authorization(user="frank", app=APP, status="authorized", options=["alert", "sound", "badge"]))
        first = c.subscribe("resume-test", ack_every=50)
        submit_many(c, "frank", "resume", 300)
        seen: list[Delivery] = []
        for delivery in first:
            seen.append(delivery)
            if len(seen) == 120:
                break
        first.close()  # acks the 120th line: the last one handed out
        assert first.acked == seen[-1].cursor
        d = seen[0]
        assert d.kind == "alert" and d.user == "frank" and d.app == APP
        assert d.content is not None and d.content.title == "Item 0" and d.presentation is not None and d.presentation.banner
        assert d.reason == "delivered" and d.rules_version and d.cause_seq > 0

        second = c.subscribe("resume-test")
        rest = [second.next(30) for _ in range(180)]
        second.close()
        cursors = [x.cursor for x in seen + rest]
        assert cursors == list(range(cursors[0], cursors[0] + 300)), "a cursor was skipped or repeated"
        assert [x.notification for x in seen + rest] == [f"resume-{i}" for i in range(300)]


def test_batched_acks_go_out_on_the_timer_without_a_close(server: HeraldServer) -> None:
    async def run() -> None:
        async with await AsyncClient.connect(server.host, server.port, token=ADMIN_TOKEN) as c:
            await c.authorization(Authorization(user="gina", app=APP, status="authorized", options=["alert"]))
            sub = await c.subscribe("timer-test", ack_every=1000, ack_interval=0.05)
            for i in range(10):
                await c.submit(Submit(id=f"timer-{i}", app=APP, user="gina", title="T", hidden_previews_body_placeholder="T"))
            got = [await sub.next(10) for _ in range(10)]
            sub.ack(got[-1])
            for _ in range(100):
                if sub.acked == got[-1].cursor:
                    break
                await asyncio.sleep(0.02)
            assert sub.acked == got[-1].cursor
            await sub.close()

    asyncio.run(run())


def test_two_subscriptions_of_one_name_form_a_group_and_the_older_goes_on_when_the_newer_closes(server: HeraldServer) -> None:
    """SPEC §9: one name's connections form a group; on one partition the newest streams, the older
    waits without an error, and goes on after the last ack when the newer closes."""
    with Client.connect(server.host, server.port, token=ADMIN_TOKEN) as c:
        c.register_app(APP)
        c.authorization(Authorization(user="gina", app=APP, status="authorized", options=["alert"]))
        first = c.subscribe("group-test", ack_every=1)
        submit_many(c, "gina", "group-a", 1)
        one = first.next(10)
        second = c.subscribe("group-test", ack_every=1)
        # Nothing was acknowledged yet (a delivery counts as processed once the next is asked for).
        assert second.next(10).cursor == one.cursor
        submit_many(c, "gina", "group-b", 1)
        two = second.next(10)
        second.close()  # acks the last one handed out
        assert second.acked == two.cursor
        submit_many(c, "gina", "group-c", 1)
        # The older member streams again, after the last ack.
        assert first.next(10).cursor == two.cursor + 1
        first.close()
