"""Typed requests, acks and the delivery line of the Herald wire protocol (docs/protocol.md)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, ClassVar, Literal, Union

Instant = Union[str, datetime]
JSON = Any


class _Unset:
    """Marks a field left out of the request (for the one field where `None` means JSON null)."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET = _Unset()


def _camel(name: str) -> str:
    head, *rest = name.rstrip("_").split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _snake(name: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in name)


def format_instant(value: datetime) -> str:
    """RFC 3339 in UTC with `Z` (a naive datetime is taken as UTC)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    value = value.astimezone(timezone.utc)
    text = value.strftime("%Y-%m-%dT%H:%M:%S")
    if value.microsecond:
        text += f".{value.microsecond // 1000:03d}"
    return text + "Z"


_PLAN: dict[type, tuple[dict[str, str], frozenset[str]]] = {}
_SCALARS = (str, int, float, bool)


def _plan(cls: type) -> tuple[dict[str, str], frozenset[str]]:
    plan = _PLAN.get(cls)
    if plan is None:
        fields = dataclasses.fields(cls)
        plan = ({f.name: f.metadata.get("wire", _camel(f.name)) for f in fields},
                frozenset(f.name for f in fields if f.metadata.get("null_ok") is True))
        _PLAN[cls] = plan
    return plan


def _wire(value: Any) -> JSON:
    if value is None or isinstance(value, _SCALARS):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        names, null_ok = _plan(type(value))
        out: dict[str, JSON] = {}
        for name in names:
            v = getattr(value, name)
            if v is None:
                if name in null_ok:
                    out[names[name]] = None
            elif isinstance(v, _SCALARS):
                out[names[name]] = v
            elif not isinstance(v, _Unset):
                out[names[name]] = _wire(v)
        return out
    if isinstance(value, datetime):
        return format_instant(value)
    if isinstance(value, (list, tuple)):
        return [_wire(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _wire(v) for k, v in value.items()}
    return value


class Request:
    """A request of one op; `to_wire()` gives the JSON object (without `rid`).

    Requests are plain (not frozen) dataclasses with slots: building one is on the hot path of a producer
    (slots make that ~0.3 µs cheaper and give the garbage collector one object a request, not two).
    """

    __slots__ = ()
    op: ClassVar[str]

    def to_wire(self) -> dict[str, JSON]:
        body = _wire(self)
        assert isinstance(body, dict)
        return {"op": self.op, **body}


# Nested members


@dataclass(frozen=True)
class Action:
    id: str
    title: str
    destructive: bool | None = None
    icon: str | None = None


@dataclass(frozen=True)
class Communication:
    sender: str
    group: str | None = None


@dataclass(frozen=True)
class FocusWindow:
    days: list[int]
    start: str
    end: str


# Producer ops


@dataclass(slots=True)
class Submit(Request):
    """One notification to one `user` or several `users` (a fan-out); (app, id) is the idempotency key."""

    op: ClassVar[str] = "submit"
    id: str
    app: str
    user: str | None = None
    users: list[str] | None = None
    interruption_level: Literal["passive", "active", "timeSensitive", "critical"] | None = None
    title: str | None = None
    subtitle: str | None = None
    body: str | None = None
    hidden_previews_body_placeholder: str | None = None
    thread_id: str | None = None
    collapse_id: str | None = None
    relevance_score: float | None = None
    sound: str | None = None
    actions: list[Action] | None = None
    communication: Communication | None = None
    marketing: bool | None = None
    deliver_at: Instant | None = None
    expires_at: Instant | None = None
    relevant_at: Instant | None = None
    data: dict[str, JSON] | None = None


@dataclass(slots=True)
class Withdraw(Request):
    op: ClassVar[str] = "withdraw"
    app: str
    id: str
    user: str | None = None


# Settings ops


@dataclass(slots=True)
class Authorization(Request):
    op: ClassVar[str] = "authorization"
    user: str
    app: str
    status: Literal["notDetermined", "denied", "authorized", "provisional"]
    options: list[Literal["alert", "sound", "badge", "criticalAlert"]] | None = None


@dataclass(slots=True)
class Settings(Request):
    """Per-app settings (with `app`) or the three global ones (without); `attention_budget=None` means no limit."""

    op: ClassVar[str] = "settings"
    user: str
    app: str | None = None
    alert: bool | None = None
    sound: bool | None = None
    badge: bool | None = None
    lock_screen: bool | None = None
    notification_center: bool | None = None
    time_sensitive: bool | None = None
    marketing_consent: bool | None = None
    delivery: Literal["immediate", "summary"] | None = None
    allow_notifications: bool | None = None
    show_previews: Literal["always", "whenUnlocked", "never"] | None = None
    attention_budget: int | None | _Unset = field(default=UNSET, metadata={"null_ok": True})


@dataclass(slots=True)
class ProvisionalKeep(Request):
    op: ClassVar[str] = "provisionalKeep"
    user: str
    app: str
    delivery: Literal["immediate", "summary"] | None = None


@dataclass(slots=True)
class ProvisionalTurnOff(Request):
    op: ClassVar[str] = "provisionalTurnOff"
    user: str
    app: str


@dataclass(slots=True)
class SummarySchedule(Request):
    op: ClassVar[str] = "summarySchedule"
    user: str
    times: list[str]
    time_zone: str


@dataclass(slots=True)
class FocusDefine(Request):
    op: ClassVar[str] = "focusDefine"
    user: str
    focus: str
    allowed_people: list[str] | None = None
    allowed_apps: list[str] | None = None
    allow_time_sensitive: bool | None = None
    schedule: list[FocusWindow] | None = None
    time_zone: str | None = None


@dataclass(slots=True)
class FocusOn(Request):
    op: ClassVar[str] = "focusOn"
    user: str
    focus: str
    until: Instant | None = None


@dataclass(slots=True)
class FocusOff(Request):
    op: ClassVar[str] = "focusOff"
    user: str
    focus: str


@dataclass(slots=True)
class Mute(Request):
    op: ClassVar[str] = "mute"
    user: str
    app: str
    until: Instant


@dataclass(slots=True)
class Snooze(Request):
    op: ClassVar[str] = "snooze"
    user: str
    app: str
    id: str
    until: Instant


@dataclass(slots=True)
class Opened(Request):
    op: ClassVar[str] = "opened"
    user: str
    app: str
    id: str | None = None


@dataclass(slots=True)
class BadgeClear(Request):
    op: ClassVar[str] = "badgeClear"
    user: str
    app: str


# Admin and connection ops


@dataclass(slots=True)
class RegisterApp(Request):
    op: ClassVar[str] = "registerApp"
    app: str
    entitlements: list[Literal["communication", "critical", "government"]] | None = None


@dataclass(slots=True)
class Clock(Request):
    op: ClassVar[str] = "clock"
    advance_to: Instant


@dataclass(slots=True)
class Ping(Request):
    op: ClassVar[str] = "ping"


@dataclass(slots=True)
class Stats(Request):
    op: ClassVar[str] = "stats"


@dataclass(slots=True)
class Erase(Request):
    """Admin: makes the user's stored notification content unreadable (SPEC §14); acked with the erasure event's seq."""

    op: ClassVar[str] = "erase"
    user: str


@dataclass(slots=True)
class Consumers(Request):
    """Admin: every durable consumer with its cursors, lag, filter and live members."""

    op: ClassVar[str] = "consumers"


@dataclass(slots=True)
class DeleteConsumer(Request):
    """Admin: closes a durable consumer's connections and removes its cursors."""

    op: ClassVar[str] = "deleteConsumer"
    consumer: str


@dataclass(slots=True)
class Hello(Request):
    op: ClassVar[str] = "hello"
    token: str | None = None


@dataclass(slots=True)
class Subscribe(Request):
    op: ClassVar[str] = "subscribe"
    consumer: str
    from_: Literal["committed", "earliest"] | int = field(default="committed", metadata={"wire": "from"})
    filter: dict[str, list[str]] | None = None


@dataclass(slots=True)
class AckCursor(Request):
    op: ClassVar[str] = "ack"
    consumer: str
    cursor: int
    partition: int | None = None


# Replies


@dataclass(frozen=True)
class Warning:
    """A warning in an ack: accepted, but worth fixing. Reads `{"code","title","detail"}` and the older `{"code","message"}`."""

    code: str
    title: str = ""
    detail: str = ""

    @property
    def message(self) -> str:
        return f"{self.title} {self.detail}".strip() if self.detail else self.title

    @staticmethod
    def from_wire(obj: Any) -> Warning:
        if not isinstance(obj, dict):
            return Warning(code="unknown", title=str(obj))
        title = obj.get("title", obj.get("message", ""))
        return Warning(code=str(obj.get("code", "")), title=str(title), detail=str(obj.get("detail", "")))


@dataclass(slots=True)
class Reply:
    """Any success reply; `raw` holds every member the server sent."""

    raw: dict[str, JSON] = field(repr=False, compare=False)

    @property
    def rid(self) -> JSON:
        return self.raw.get("rid")


@dataclass(slots=True)
class Ack(Reply):
    """The ack of a state-changing op: stored (or already stored, `duplicate`) at `seq` of `partition`."""

    seq: int = 0
    duplicate: bool = False
    warnings: list[Warning] = field(default_factory=list)
    partition: int = 0
    events: int | None = None
    appended: int | None = None

    @staticmethod
    def from_wire(obj: dict[str, JSON]) -> Ack:
        warnings = obj.get("warnings")
        if not warnings and len(obj) <= 4 and "partition" not in obj and "duplicate" not in obj:  # {"ok","rid","seq","warnings"}
            return Ack(raw=obj, seq=obj.get("seq", 0))
        return Ack(
            raw=obj,
            seq=int(obj.get("seq", 0)),
            duplicate=bool(obj.get("duplicate", False)),
            warnings=[Warning.from_wire(w) for w in obj.get("warnings", [])],
            partition=int(obj.get("partition", 0)),
            events=obj.get("events"),
            appended=obj.get("appended"),
        )


@dataclass(frozen=True)
class Route:
    """Where a partition is served: its owner's `address` (host:port) and lease `epoch` (hello's `routes`)."""

    partition: int
    address: str
    epoch: int = 0


def _routes(value: JSON) -> list[Route]:
    """Reads `routes` as a list (each with `partition`, or in partition order) or as an object keyed by partition."""

    def route(p: int, r: JSON) -> Route | None:
        if isinstance(r, str):
            return Route(p, r)
        if not isinstance(r, dict):
            return None
        address = r.get("address", r.get("owner", r.get("advertise")))
        if not isinstance(address, str):
            return None
        return Route(int(r.get("partition", p)), address, int(r.get("epoch", 0) or 0))

    if isinstance(value, list):
        found = [route(i, r) for i, r in enumerate(value)]
    elif isinstance(value, dict):
        found = [route(int(k), r) for k, r in value.items() if str(k).isdigit()]
    else:
        return []
    return sorted((r for r in found if r is not None), key=lambda r: r.partition)


@dataclass(slots=True)
class HelloReply(Reply):
    """The reply to hello: the roles granted and, once the server has partitions, how to route (SPEC §9)."""

    server: str = ""
    roles: list[str] = field(default_factory=list)
    apps: list[str] = field(default_factory=list)
    instance: str | None = None
    partitions: int = 1
    hash: str | None = None
    routes: list[Route] = field(default_factory=list)

    @staticmethod
    def from_wire(obj: dict[str, JSON]) -> HelloReply:
        instance = obj.get("instance")
        hash_ = obj.get("hash")
        return HelloReply(
            raw=obj, server=str(obj.get("server", "")), roles=list(obj.get("roles", [])), apps=list(obj.get("apps", [])),
            instance=instance if isinstance(instance, str) else None,
            partitions=max(1, int(obj.get("partitions", 1) or 1)),
            hash=hash_ if isinstance(hash_, str) else None,
            routes=_routes(obj.get("routes")),
        )


@dataclass(frozen=True)
class ConsumerPartition:
    """A durable consumer's position in one partition: its acknowledged cursor, the stored delivery head, the lag."""

    partition: int
    acked: int
    head: int
    lag: int


@dataclass(frozen=True)
class ConsumerStatus:
    """One durable consumer as `consumers` lists it; `members` are its group's live connections, newest first
    (each as the server wrote it: `member`, `partitions`, and on one instance `connection`, `peer`, `generation`…)."""

    consumer: str
    partitions: list[ConsumerPartition]
    lag: int
    filter: dict[str, list[str]] | None
    members: list[dict[str, JSON]]
    acked_at: str | None
    created_at: str | None

    @staticmethod
    def from_wire(obj: dict[str, JSON]) -> ConsumerStatus:
        def partition(p: Any) -> ConsumerPartition:
            return ConsumerPartition(int(p.get("partition", 0)), int(p.get("acked", 0)), int(p.get("head", 0)), int(p.get("lag", 0)))

        partitions = obj.get("partitions")
        members = obj.get("members")
        filter_ = obj.get("filter")
        acked_at, created_at = obj.get("ackedAt"), obj.get("createdAt")
        return ConsumerStatus(
            consumer=str(obj.get("consumer", "")),
            partitions=[partition(p) for p in partitions if isinstance(p, dict)] if isinstance(partitions, list) else [],
            lag=int(obj.get("lag", 0) or 0),
            filter=filter_ if isinstance(filter_, dict) else None,
            members=[m for m in members if isinstance(m, dict)] if isinstance(members, list) else [],
            acked_at=acked_at if isinstance(acked_at, str) else None,
            created_at=created_at if isinstance(created_at, str) else None,
        )


@dataclass(slots=True)
class ConsumersReply(Reply):
    """The reply to `consumers`: every durable consumer, then the ephemeral streams (as the server wrote them)."""

    consumers: list[ConsumerStatus] = field(default_factory=list)
    ephemeral: list[dict[str, JSON]] = field(default_factory=list)

    def named(self, consumer: str) -> ConsumerStatus | None:
        """The durable consumer of that name, if listed."""
        return next((c for c in self.consumers if c.consumer == consumer), None)

    @staticmethod
    def from_wire(obj: dict[str, JSON]) -> ConsumersReply:
        consumers, ephemeral = obj.get("consumers"), obj.get("ephemeral")
        return ConsumersReply(
            raw=obj,
            consumers=[ConsumerStatus.from_wire(c) for c in consumers if isinstance(c, dict)] if isinstance(consumers, list) else [],
            ephemeral=[e for e in ephemeral if isinstance(e, dict)] if isinstance(ephemeral, list) else [],
        )


@dataclass(slots=True)
class DeleteConsumerReply(Reply):
    """The reply to `deleteConsumer`: the cursor it had acknowledged and how many live connections were closed."""

    consumer: str = ""
    acked: int = 0
    closed_connections: int = 0

    @staticmethod
    def from_wire(obj: dict[str, JSON]) -> DeleteConsumerReply:
        return DeleteConsumerReply(raw=obj, consumer=str(obj.get("consumer", "")), acked=int(obj.get("acked", 0) or 0),
                                   closed_connections=int(obj.get("closedConnections", 0) or 0))


@dataclass(frozen=True)
class Presentation:
    banner: bool = False
    sound: bool = False
    lock_screen: bool = False
    notification_center: bool = False
    override_silent: bool = False
    badge: int | None = None


@dataclass(frozen=True)
class Content:
    """A notification's content as the user's `showPreviews` allows; `raw` has every member."""

    raw: dict[str, JSON] = field(repr=False, compare=False)
    title: str | None = None
    subtitle: str | None = None
    body: str | None = None
    hidden_previews_body_placeholder: str | None = None
    interruption_level: str | None = None
    relevance_score: float | None = None
    sound: str | None = None
    thread_id: str | None = None
    actions: list[dict[str, JSON]] | None = None
    communication: dict[str, JSON] | None = None
    data: dict[str, JSON] | None = None


def _known(cls: type, obj: dict[str, JSON]) -> dict[str, JSON]:
    names = {f.name for f in dataclasses.fields(cls)}
    return {_snake(k): v for k, v in obj.items() if _snake(k) in names and k != "raw"}


@dataclass(frozen=True)
class Delivery:
    """One delivery line: a decision of the engine, at `cursor` of the delivery stream."""

    raw: dict[str, JSON] = field(repr=False, compare=False)
    cursor: int
    kind: str
    user: str
    at: str
    reason: str
    rules_version: str = ""
    cause_seq: int = 0
    partition: int | None = None
    app: str | None = None
    notification: str | None = None
    presentation: Presentation | None = None
    content: Content | None = None
    items: list[dict[str, JSON]] | None = None
    summary_at: str | None = None
    focus: str | None = None
    replaces: str | None = None
    provisional: bool = False
    time_sensitive_intro: bool = False
    snoozed: bool = False
    part: int | None = None
    parts: int | None = None

    @staticmethod
    def from_wire(obj: dict[str, JSON]) -> Delivery:
        values = _known(Delivery, obj)
        if isinstance(obj.get("presentation"), dict):
            values["presentation"] = Presentation(**_known(Presentation, obj["presentation"]))
        if isinstance(obj.get("content"), dict):
            values["content"] = Content(raw=obj["content"], **_known(Content, obj["content"]))
        return Delivery(raw=obj, **values)
