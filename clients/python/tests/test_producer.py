"""Every op round-trips through the sync and asyncio producers; pipelining, typed errors and warnings."""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone

import pytest
from conftest import ADMIN_TOKEN, PRODUCER_TOKEN, HeraldServer

from herald_client import (
    Ack,
    Action,
    AsyncClient,
    AuthenticationError,
    Authorization,
    BadgeClear,
    Client,
    ClockError,
    FocusDefine,
    FocusOff,
    FocusOn,
    FocusWindow,
    ForbiddenError,
    HeraldError,
    Mute,
    NotFoundError,
    Opened,
    ProvisionalKeep,
    ProvisionalTurnOff,
    Settings,
    Snooze,
    Submit,
    SummarySchedule,
    ValidationError,
    Warning,
    error_class,
)

APP = "com.example.allowed"


def test_every_op_round_trips_with_a_typed_ack(server: HeraldServer) -> None:
    with Client.connect(server.host, server.port, token=ADMIN_TOKEN) as c:
        assert c.hello.roles == ["producer", "settings", "consumer", "admin"]
        seqs: list[int] = []

        def ok(ack: Ack) -> Ack:
            assert isinstance(ack, Ack) and ack.seq > 0 and ack.partition == 0 and not ack.duplicate
            seqs.append(ack.seq)
            return ack

        ok(c.register_app(APP, ["communication"]))
        ok(c.authorization(Authorization(user="alice", app=APP, status="authorized", options=["alert", "sound", "badge"])))
        ok(c.settings(Settings(user="alice", app=APP, sound=False, delivery="immediate")))
        ok(c.settings(Settings(user="alice", show_previews="whenUnlocked", attention_budget=None)))
        ok(c.authorization(Authorization(user="bob", app=APP, status="provisional")))
        ok(c.provisional_keep(ProvisionalKeep(user="bob", app=APP, delivery="summary")))
        ok(c.provisional_turn_off(ProvisionalTurnOff(user="bob", app=APP)))
        ok(c.summary_schedule(SummarySchedule(user="alice", times=["08:00", "18:00"], time_zone="Europe/Berlin")))
        ok(c.focus_define(FocusDefine(user="alice", focus="Sleep", allowed_people=["mom"],
                                      schedule=[FocusWindow(days=[1, 2, 3, 4, 5, 6, 7], start="22:00", end="07:00")],
                                      time_zone="Europe/Berlin")))
        ok(c.focus_on(FocusOn(user="alice", focus="Sleep", until=datetime(2026, 3, 27, 9, 0, tzinfo=timezone.utc))))
        ok(c.focus_off(FocusOff(user="alice", focus="Sleep")))
        submitted = ok(c.submit(Submit(id="n-1", app=APP, user="alice", title="Your order shipped", body="Arrives Tuesday",
                                       hidden_previews_body_placeholder="Order update",
                                       actions=[Action(id="track", title="Track")], data={"order": 42})).result())
        ok(c.snooze(Snooze(user="alice", app=APP, id="n-1", until="2026-03-27T08:00:00Z")))
        ok(c.opened(Opened(user="alice", app=APP, id="n-1")))
        ok(c.badge_clear(BadgeClear(user="alice", app=APP)))
        ok(c.mute(Mute(user="alice", app=APP, until="2026-03-27T07:30:00Z")))
        ok(c.withdraw(APP, "n-1"))
        clock = ok(c.clock("2026-03-27T07:10:00Z"))
        assert clock.raw["now"] == "2026-03-27T07:10:00Z"
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)

        again = c.submit(Submit(id="n-1", app=APP, user="alice", title="Your order shipped", body="Arrives Tuesday",
                                hidden_previews_body_placeholder="Order update",
                                actions=[Action(id="track", title="Track")], data={"order": 42})).result()
        assert again.duplicate and again.seq == submitted.seq

        assert c.ping().raw["op"] == "pong"
        stats = c.stats()
        assert stats["ok"] is True and stats["eventsCommitted"] >= len(seqs)


def test_warnings_are_typed_from_either_shape(server: HeraldServer) -> None:
    with Client.connect(server.host, server.port, token=ADMIN_TOKEN) as c:
        ack = c.focus_off(FocusOff(user="carol", focus="Work"))
        assert [w.code for w in ack.warnings] == ["focus_not_on"]
        assert ack.warnings[0].message
        ack = c.submit(Submit(id="warn-1", app=APP, user="carol", title="No placeholder")).result()
        assert "missing_hidden_previews_placeholder" in [w.code for w in ack.warnings]
    old = Warning.from_wire({"code": "x", "message": "old shape"})
    new = Warning.from_wire({"code": "x", "title": "new shape", "detail": "why"})
    assert (old.code, old.title, old.detail) == ("x", "old shape", "")
    assert (new.title, new.detail) == ("new shape", "why")


def test_ten_thousand_pipelined_submits_are_acked_in_order(server: HeraldServer) -> None:
    with Client.connect(server.host, server.port, token=ADMIN_TOKEN, window=512) as c:
        c.authorization(Authorization(user="dave", app=APP, status="authorized", options=["alert"]))
        futures = [c.submit(Submit(id=f"bulk-{i}", app=APP, user="dave", title="Bulk", hidden_previews_body_placeholder="Bulk"))
                   for i in range(10_000)]
        acks = [f.result(60) for f in futures]
    seqs = [a.seq for a in acks]
    assert seqs == list(range(seqs[0], seqs[0] + 10_000))
    assert not any(a.duplicate for a in acks)


def test_a_request_json_cannot_write_fails_its_own_future_and_the_next_ones_go_on(server: HeraldServer) -> None:
    with Client.connect(server.host, server.port, token=ADMIN_TOKEN) as c:
        c.authorization(Authorization(user="fay", app=APP, status="authorized", options=["alert"]))
        futures = [c.submit(Submit(id=f"json-{i}", app=APP, user="fay", title="Hi", hidden_previews_body_placeholder="Hi",
                                   data={"tags": {"a set"}} if i == 1 else None)) for i in range(3)]
        with pytest.raises(TypeError):
            futures[1].result(30)
        assert futures[0].result(30).seq < futures[2].result(30).seq


def test_the_async_producer_pipelines_and_awaits_acks(server: HeraldServer) -> None:
    async def run() -> list[Ack]:
        async with await AsyncClient.connect(server.host, server.port, token=ADMIN_TOKEN, window=64) as c:
            await c.authorization(Authorization(user="erin", app=APP, status="authorized", options=["alert"]))
            futures = []
            for i in range(2_000):
                futures.append(await c.send(Submit(id=f"async-{i}", app=APP, user="erin", title="Async",
                                                   hidden_previews_body_placeholder="Async")))
                assert c.in_flight <= 64
            acks = list(await asyncio.gather(*futures))
            assert (await c.ping()).raw["op"] == "pong"
            assert (await c.withdraw(APP, "async-0")).seq > acks[-1].seq
            with pytest.raises(NotFoundError):
                await c.withdraw(APP, "async-never-sent")
            return acks

    acks = asyncio.run(run())
    assert [a.seq for a in acks] == sorted(a.seq for a in acks) and len(acks) == 2_000


def test_a_wrong_token_raises_an_authentication_error(server: HeraldServer) -> None:
    with pytest.raises(AuthenticationError) as caught:
        Client.connect(server.host, server.port, token="not-the-token")
    assert caught.value.code == "invalid_token" and caught.value.title

    async def run() -> None:
        await AsyncClient.connect(server.host, server.port, token="not-the-token")

    with pytest.raises(AuthenticationError):
        asyncio.run(run())


def test_a_refused_op_raises_the_typed_error_and_the_connection_goes_on(server: HeraldServer) -> None:
    with Client.connect(server.host, server.port, token=PRODUCER_TOKEN) as c:
        with pytest.raises(ForbiddenError) as forbidden:
            c.register_app("com.example.other")
        assert forbidden.value.code == "forbidden" and forbidden.value.detail
        with pytest.raises(ForbiddenError) as other_app:
            c.submit(Submit(id="x", app="com.example.other", user="u", title="Hi")).result()
        assert other_app.value.code == "forbidden_app"
        with pytest.raises(ValidationError) as invalid:
            c.submit(Submit(id="x", app=APP, user="u", relevance_score=2.0)).result()
        assert invalid.value.code == "relevance_score_out_of_range"
        assert c.submit(Submit(id="after-errors", app=APP, user="u", title="Hi", hidden_previews_body_placeholder="Hi")).result().seq > 0
    with Client.connect(server.host, server.port, token=ADMIN_TOKEN) as admin:
        with pytest.raises(ClockError) as backwards:
            admin.clock("2000-01-01T00:00:00Z")
        assert backwards.value.code == "clock_backwards"
    assert error_class("unknown_consumer") is NotFoundError and issubclass(error_class("missing_field"), HeraldError)
