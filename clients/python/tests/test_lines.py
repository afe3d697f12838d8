"""Request lines are what the JSON encoder writes of `to_wire()`, and the common ack read by its pattern equals the JSON reading."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

import pytest

from herald_client import (
    Action,
    Authorization,
    Communication,
    FocusDefine,
    FocusWindow,
    Settings,
    Submit,
)
from herald_client.lines import read_ack, request_line
from herald_client.models import Ack, AckCursor, Clock, Hello, Request, Subscribe

REQUESTS: list[Request | dict[str, Any]] = [
    Submit(id="n-1", app="com.example.mail", user="alice", title="Hi", hidden_previews_body_placeholder="Bench"),
    Submit(id="n-2", app="com.example.mail", users=["alice", "bob"], title="Ünïcødé \"quoted\" \\ \n tab\t",
           relevance_score=0.25, marketing=False, interruption_level="timeSensitive",
           deliver_at=datetime(2026, 3, 27, 7, 0, 0, 123000, tzinfo=timezone.utc), expires_at="2026-03-28T00:00:00Z",
           actions=[Action(id="reply", title="Reply", destructive=True)], communication=Communication(sender="bob"),
           data={"k": [1, 2.5, None, True], 3: {"nested": datetime(2026, 1, 1)}}),
    Submit(id="n-3", app="a", user="u", relevance_score=float("nan"), sound="default"),
    Authorization(user="u", app="a", status="authorized", options=["alert", "badge"]),
    Settings(user="u"),
    Settings(user="u", app="a", attention_budget=None),
    Settings(user="u", attention_budget=3, delivery="summary", alert=False),
    FocusDefine(user="u", focus="work", schedule=[FocusWindow(days=[1, 2], start="09:00", end="17:00")], time_zone="Europe/Paris"),
    Clock(advance_to=datetime(2026, 3, 27, 8, 0)),
    Hello(token="t"),
    Hello(),
    Subscribe(consumer="c", from_=17, filter={"kind": ["alert"]}),
    AckCursor(consumer="c", cursor=9, partition=2),
    {"op": "ping"},
    {"op": "stats", "extra": [1, {"a": None}]},
]


@pytest.mark.parametrize("request_", REQUESTS)
@pytest.mark.parametrize("direct", [False, True])
def test_a_request_line_is_the_json_of_its_wire_object(request_: Request | dict[str, Any], direct: bool) -> None:
    body = request_.to_wire() if isinstance(request_, Request) else dict(request_)
    body["rid"] = 4711
    if direct:
        body["route"] = "direct"
    expected = (json.dumps(body, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
    assert request_line(request_, 4711, direct) == expected


@pytest.mark.parametrize("line", [
    b'{"ok":true,"partition":0,"rid":6,"seq":4,"warnings":[]}',
    b'{"ok":true,"partition":3,"rid":123456,"seq":98765432101,"warnings":[]}',
    b'{"duplicate":true,"ok":true,"partition":0,"rid":4,"seq":3,"warnings":[]}',
    b'{"duplicate":false,"ok":true,"partition":1,"rid":4,"seq":3,"warnings":[]}',
])
def test_the_common_ack_read_by_its_pattern_equals_its_json_reading(line: bytes) -> None:
    ack = read_ack(line)
    assert ack is not None
    expected = Ack.from_wire(json.loads(line))
    assert ack.raw == expected.raw and list(ack.raw) == list(expected.raw)
    assert (ack.seq, ack.duplicate, ack.warnings, ack.partition, ack.events, ack.appended) == (
        expected.seq, expected.duplicate, expected.warnings, expected.partition, expected.events, expected.appended)


@pytest.mark.parametrize("line", [
    b'{"ok":true,"partition":0,"rid":3,"seq":3,"warnings":[{"code":"missing_hidden_previews_placeholder","detail":"d","title":"t"}]}',
    b'{"appended":2,"events":2,"ok":true,"partition":0,"rid":9,"seq":12,"warnings":[]}',
    b'{"error":{"code":"forbidden","detail":"d","title":"t"},"ok":false,"rid":5}',
    b'{"ok":true,"rid":7}',
    b'{"cursor":12,"ok":true,"rid":8}',
    b'{"ok":true,"partition":0,"rid":"hello","seq":1,"warnings":[]}',
])
def test_any_other_line_is_left_to_the_json_parser(line: bytes) -> None:
    assert read_ack(line) is None
