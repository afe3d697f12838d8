"""The asyncio producer (`AsyncClient`) and consumer (`AsyncSubscription`): pipelining, a bounded window, reconnects."""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import json
import random
import socket as socket_module
import ssl as ssl_module
from dataclasses import dataclass
from typing import Any, AsyncIterator, Awaitable, Callable, Coroutine, Union

from .errors import AuthenticationError, ClientClosedError, HeraldError, error_from_reply
from .lines import read_ack, request_line
from .routing import RoutingTable, owner_address, routing_user
from .models import (
    Ack,
    AckCursor,
    Authorization,
    BadgeClear,
    Clock,
    Consumers,
    ConsumersReply,
    DeleteConsumer,
    DeleteConsumerReply,
    Delivery,
    Erase,
    FocusDefine,
    FocusOff,
    FocusOn,
    Hello,
    HelloReply,
    Mute,
    Opened,
    ProvisionalKeep,
    ProvisionalTurnOff,
    RegisterApp,
    Reply,
    Request,
    Settings,
    Snooze,
    Submit,
    Subscribe,
    SummarySchedule,
    Withdraw,
)

AnyFuture = Union["asyncio.Future[Any]", "concurrent.futures.Future[Any]"]
Parse = Callable[[dict[str, Any]], Any]

_READ_LIMIT = 1 << 20
_QUEUE_LINES = 8192
_KEEPALIVE = 60.0


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_DECODER = json.JSONDecoder()
_CHUNK = 1 << 16
_FLUSH_LINES = 256
_WRITE_BUFFER = 1 << 18


def _encode(body: dict[str, Any]) -> bytes:
    return (_ENCODER.encode(body) + "\n").encode()


@dataclass(slots=True)
class _Pending:
    rid: int
    line: bytes
    future: AnyFuture
    parse: Parse
    # Kept to send it again elsewhere (after `not_owner`, or when its partition's owner cannot be reached).
    request: Request | dict[str, Any]
    attempts: int = 0


def _settle(future: AnyFuture, result: Any = None, error: BaseException | None = None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


def _shut_down(writer: asyncio.StreamWriter) -> None:
    """Ends the connection for every holder of its socket: a process forked without exec
    (multiprocessing's default start method on Linux) keeps a copy of the descriptor, which a close
    alone leaves open, so the server would never see this end. Only once nothing waits in the
    transport's buffer (a TLS close then skips its close_notify, which the server does not need)."""
    sock = writer.get_extra_info("socket")
    if sock is None or writer.transport.get_write_buffer_size() > 0:
        return
    try:
        sock.shutdown(socket_module.SHUT_RDWR)
    except OSError:
        pass


@dataclass(frozen=True)
class Backoff:
    """Reconnect delays: `initial` doubling up to `maximum`, with jitter; `attempts` 0 retries forever."""

    initial: float = 0.05
    maximum: float = 2.0
    attempts: int = 0


class _Connection:
    """One connection with hello, pipelined requests matched by `rid`, and reconnects that resend what was not answered."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        token: str | None,
        ssl: ssl_module.SSLContext | None,
        window: int,
        backoff: Backoff,
        on_line: Callable[[dict[str, Any]], None] | None = None,
        on_connected: Callable[[], list[_Pending]] | None = None,
        backlogged: Callable[[], bool] | None = None,
        drained: Callable[[], Awaitable[Any]] | None = None,
        on_ended: Callable[[HeraldError], None] | None = None,
        direct: bool = False,
        on_refused: Callable[[_Pending, HeraldError, dict[str, Any]], bool] | None = None,
        on_orphaned: Callable[[list[_Pending]], None] | None = None,
    ) -> None:
        self.on_ended = on_ended
        # A connection to a partition's owner: its requests say `"route":"direct"` (a non-owner refuses them
        # with `not_owner` instead of forwarding), and what it cannot deliver goes back to the producer.
        self.direct = direct
        self.on_refused = on_refused
        self.on_orphaned = on_orphaned
        self.last_write = 0.0
        self.backlogged = backlogged
        self.drained = drained
        self.host, self.port, self.token, self.ssl = host, port, token, ssl
        self.window = window
        self.backoff = backoff
        self.on_line = on_line
        self.on_connected = on_connected
        self.pending: collections.deque[_Pending] = collections.deque()
        self.next_rid = 1
        self.writer: asyncio.StreamWriter | None = None
        self.reader_task: asyncio.Task[None] | None = None
        self.writable = False
        self.closed = False
        self.fatal: HeraldError | None = None
        self.room = asyncio.Event()
        self.room.set()
        self.up = asyncio.Event()
        self.hello: HelloReply | None = None
        self.reconnects = 0
        self.outbox: list[bytes] = []
        self.flush_scheduled = False
        self.congested = False

    async def connect(self) -> HelloReply:
        await self._open()
        self.reader_task = asyncio.get_running_loop().create_task(self._run())
        assert self.hello is not None
        return self.hello

    async def _open(self) -> None:
        reader, writer = await asyncio.open_connection(self.host, self.port, ssl=self.ssl, limit=_READ_LIMIT)
        writer.write(_encode({**Hello(token=self.token).to_wire(), "rid": "hello"}))
        line = await reader.readline()
        if not line:
            writer.close()
            raise ConnectionResetError("closed before the hello reply")
        reply = json.loads(line)
        if not reply.get("ok"):
            writer.close()
            raise error_from_reply(reply)
        self.hello = HelloReply.from_wire(reply)
        self.reader, self.writer = reader, writer
        extra = self.on_connected() if self.on_connected else []
        # Resend, in order, everything sent before that was not answered; then the ops of the owner.
        for p in extra:
            self.pending.append(p)
        writer.writelines([p.line for p in self.pending])
        self.last_write = asyncio.get_running_loop().time()
        self.writable = True
        self.up.set()

    async def _run(self) -> None:
        while not self.closed:
            try:
                await self._read_until_closed()
            except (OSError, asyncio.IncompleteReadError, ValueError):
                pass
            self._drop_connection()
            if self.closed or self.fatal:
                break
            await self._reconnect()
        error = self.fatal or ClientClosedError()
        if self.on_orphaned is not None and not self.closed:
            orphans = list(self.pending)
            self.pending.clear()
            self.on_orphaned(orphans)
        self._fail_all(error)
        if self.on_ended is not None:
            self.on_ended(error)

    async def _read_until_closed(self) -> None:
        assert self.reader is not None
        reader = self.reader
        decode = _DECODER.decode
        pending = self.pending
        rest = b""
        while True:
            # Read what is there and split it: far cheaper than a readline a reply.
            chunk = await reader.read(_CHUNK)
            if not chunk:
                return
            lines = (rest + chunk if rest else chunk).split(b"\n")
            rest = lines.pop()
            if len(rest) > _READ_LIMIT:
                raise ValueError("a line longer than the protocol allows")
            for line in lines:
                # The common ack of the request first in line settles its future here; anything else is parsed.
                ack = read_ack(line)
                if ack is not None and pending and pending[0].parse is _ack and pending[0].rid == ack.raw["rid"]:
                    future = pending.popleft().future
                    if not future.done():
                        future.set_result(ack)
                elif line and self._line(ack.raw if ack is not None else decode(line.decode())):
                    self._room()
                    assert self.drained is not None
                    await self.drained()
            self._room()

    def _room(self) -> None:
        if len(self.pending) < self.window:
            self.room.set()

    def _line(self, obj: dict[str, Any]) -> bool:
        """Handles one line other than the common ack; True when reading is to wait for the user to catch up."""
        if "ok" in obj:
            rid = obj.get("rid")
            pending = self.pending
            if pending and rid == pending[0].rid:
                p = pending.popleft()
                if obj["ok"]:
                    try:
                        _settle(p.future, p.parse(obj))
                    except Exception as e:  # a reply the parser cannot read
                        _settle(p.future, error=e)
                else:
                    error = error_from_reply(obj)
                    if error.code == "not_owner" and self.on_refused is not None and self.on_refused(p, error, obj):
                        return False
                    _settle(p.future, error=error)
            elif not obj["ok"]:
                err = error_from_reply(obj)
                if err.code == "grant_revoked":
                    self.fatal = err
            return False
        op = obj.get("op")
        if op == "goodbye":
            # The server answers what it has read and closes: send nothing more on this connection.
            self.writable = False
            self.up.clear()
        elif self.on_line is not None:
            self.on_line(obj)
            # Stop reading until the user catches up: TCP then pauses the server's stream.
            return self.backlogged is not None and self.drained is not None and self.backlogged()
        return False

    def _drop_connection(self) -> None:
        self.outbox = []
        self.writable = False
        self.up.clear()
        if self.writer is not None:
            _shut_down(self.writer)
            self.writer.close()
            self.writer = None

    async def _reconnect(self) -> None:
        delay = self.backoff.initial
        attempt = 0
        while not self.closed:
            attempt += 1
            try:
                await self._open()
                self.reconnects += 1
                return
            except AuthenticationError as e:
                self.fatal = e
                return
            except (OSError, ValueError, HeraldError):
                if self.backoff.attempts and attempt >= self.backoff.attempts:
                    self.fatal = HeraldError("unreachable", f"Could not reconnect to {self.host}:{self.port}", f"Gave up after {attempt} attempts.")
                    return
                await asyncio.sleep(delay * (0.5 + random.random() / 2))
                delay = min(delay * 2, self.backoff.maximum)

    def _fail_all(self, error: HeraldError) -> None:
        while self.pending:
            _settle(self.pending.popleft().future, error=error)
        self.room.set()

    def make(self, request: Request | dict[str, Any], future: AnyFuture, parse: Parse, attempts: int = 0) -> _Pending:
        rid = self.next_rid
        self.next_rid = rid + 1
        return _Pending(rid, request_line(request, rid, self.direct), future, parse, request, attempts)

    def enqueue(self, request: Request | dict[str, Any], future: AnyFuture, parse: Parse, attempts: int = 0) -> None:
        """Sends at once when connected, else holds it for the reconnect; the caller keeps the window."""
        if self.fatal is not None or self.closed:
            _settle(future, error=self.fatal or ClientClosedError())
            return
        p = self.make(request, future, parse, attempts)
        pending = self.pending
        pending.append(p)
        if len(pending) >= self.window:
            self.room.clear()
        if self.writable and self.writer is not None:
            self.outbox.append(p.line)
            if not self.flush_scheduled:
                self.flush_scheduled = True
                asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        # One write per turn of the loop for every line enqueued in it: far fewer system calls than a write a line.
        self.flush_scheduled = False
        lines, self.outbox = self.outbox, []
        if self.writable and self.writer is not None and lines:
            self.writer.write(b"".join(lines))
            self.last_write = asyncio.get_running_loop().time()
            self.congested = self.writer.transport.get_write_buffer_size() > _WRITE_BUFFER

    async def send(self, request: Request | dict[str, Any], parse: Parse) -> asyncio.Future[Any]:
        while len(self.pending) >= self.window and not self.closed and self.fatal is None:
            await self.room.wait()
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.enqueue(request, future, parse)
        if len(self.outbox) >= _FLUSH_LINES:
            # A long run of sends without a turn of the loop: write what is there.
            self._flush()
        if self.congested:
            # The socket holds more than it sends (checked at each write): wait for it to drain.
            self.congested = False
            if self.writer is not None:
                try:
                    await self.writer.drain()
                except OSError:
                    pass
        return future

    async def close(self) -> None:
        self.closed = True
        self._drop_connection()
        if self.reader_task is not None:
            self.reader_task.cancel()
            try:
                await self.reader_task
            except (asyncio.CancelledError, Exception):
                pass
        self._fail_all(ClientClosedError())


def _ack(obj: dict[str, Any]) -> Ack:
    return Ack.from_wire(obj)


def _reply(obj: dict[str, Any]) -> Reply:
    return Reply(raw=obj)


def _raw(obj: dict[str, Any]) -> dict[str, Any]:
    return obj


class AsyncClient:
    """A producer. Every op method awaits its ack; `send` returns the ack's future for pipelining.

    ```
    client = await AsyncClient.connect("127.0.0.1", 7411, token="…")
    futures = [await client.send(Submit(id=f"n{i}", app="a", user="u", title="Hi")) for i in range(1000)]
    acks = await asyncio.gather(*futures)
    ```

    Routing (SPEC §9): when hello's routes name partitions' owners at other addresses, a request for a user
    goes on a connection to its partition's owner (opened on first use); requests without a user and
    fan-outs go to the instance connected to, which forwards. A `not_owner` refusal refreshes the routes
    (a new hello) and sends the request again; an owner that cannot be reached leaves its requests to the
    instance connected to.
    """

    _OWNER_ATTEMPTS = 3
    _NOT_OWNER_RETRIES = 3

    def __init__(self, connection: _Connection, routing: bool = True) -> None:
        self._c = connection
        self._routing = routing
        # Connections to partitions' owners by address; None marks one that could not be reached.
        self._owners: dict[str, _Connection | None] = {}
        self._table_hello: HelloReply | None = None
        self._table = RoutingTable(1, None, [], self._address)
        self._refreshing: asyncio.Future[None] | None = None
        # Requests on their way from a `not_owner` refusal to another connection.
        self._moving: set[AnyFuture] = set()
        #: How many requests were sent again after a `not_owner` refusal.
        self.not_owner_resends = 0
        connection.on_refused = self._refused

    @property
    def _address(self) -> str:
        return f"{self._c.host}:{self._c.port}"

    @property
    def routes(self) -> RoutingTable:
        """The routing table of the latest hello (rebuilt when a reconnect or a refresh brings a new one)."""
        hello = self._c.hello
        if hello is not None and hello is not self._table_hello:
            self._table_hello = hello
            self._table = RoutingTable.from_hello(hello, self._address)
            # Owners that could not be reached are tried again under new routes.
            self._owners = {a: c for a, c in self._owners.items() if c is not None}
        return self._table

    def _target(self, request: Request | dict[str, Any]) -> _Connection:
        """The connection a request goes on: its partition's owner when that is elsewhere, else the one connected to."""
        if not self._routing:
            return self._c
        table = self.routes
        if not table.direct:
            return self._c
        address = table.address_for(routing_user(request))
        if address is None:
            return self._c
        if address in self._owners:
            return self._owners[address] or self._c
        return self._open_owner(address) or self._c

    def _open_owner(self, address: str) -> _Connection | None:
        host, _, port = address.rpartition(":")
        if not port.isdigit():
            self._owners[address] = None
            return None
        c = self._c
        owner = _Connection(host.strip("[]") or "127.0.0.1", int(port), token=c.token, ssl=c.ssl, window=c.window,
                            backoff=Backoff(c.backoff.initial, c.backoff.maximum, self._OWNER_ATTEMPTS),
                            direct=True, on_refused=self._refused)
        owner.on_orphaned = lambda orphans: self._owner_lost(address, owner, orphans)
        self._owners[address] = owner
        asyncio.get_running_loop().create_task(self._start_owner(address, owner))
        return owner

    async def _start_owner(self, address: str, owner: _Connection) -> None:
        # Requests queued meanwhile are written once the hello is answered.
        try:
            await owner.connect()
        except (OSError, ValueError, HeraldError):
            owner.closed = True
            orphans = list(owner.pending)
            owner.pending.clear()
            self._owner_lost(address, owner, orphans)

    def _owner_lost(self, address: str, owner: _Connection, orphans: list[_Pending]) -> None:
        """An owner that could not be reached: marked so until the routes change; its requests go elsewhere."""
        if self._owners.get(address) is owner:
            self._owners[address] = None
        self._rehome(orphans)

    def _rehome(self, orphans: list[_Pending]) -> None:
        """Requests an owner's connection could not deliver go, in order, to the instance connected to."""
        for p in orphans:
            if not p.future.done():
                self._c.enqueue(p.request, p.future, p.parse, p.attempts)

    def _dispatch(self, request: Request | dict[str, Any], future: AnyFuture, parse: Parse, attempts: int = 0) -> None:
        """Queues a request on its connection (on the loop's thread; the caller keeps the window)."""
        self._target(request).enqueue(request, future, parse, attempts)

    def _refused(self, p: _Pending, error: HeraldError, reply: dict[str, Any]) -> bool:
        """`not_owner`: the routes moved. Refresh them and send the request again (a few times at most)."""
        if p.attempts >= self._NOT_OWNER_RETRIES or p.future.done():
            return False
        self._moving.add(p.future)
        self.not_owner_resends += 1
        asyncio.get_running_loop().create_task(self._resend(p, owner_address(reply)))
        return True

    async def _resend(self, p: _Pending, owner: str | None) -> None:
        try:
            await self.refresh_routes()
            user = routing_user(p.request)
            if owner is not None and user is not None and self.routes.partitions > 1:
                self._table = self._table.with_owner(self._table.partition_of(user), owner)
            self._dispatch(p.request, p.future, p.parse, p.attempts + 1)
        finally:
            self._moving.discard(p.future)

    async def refresh_routes(self) -> HelloReply:
        """Says hello again on the connection to the instance connected to: the latest routes (one refresh at a time)."""
        if self._refreshing is not None:
            await asyncio.shield(self._refreshing)
            assert self._c.hello is not None
            return self._c.hello
        loop = asyncio.get_running_loop()
        self._refreshing = loop.create_future()
        try:
            future: asyncio.Future[Any] = loop.create_future()
            self._c.enqueue(Hello(token=self._c.token).to_wire(), future, HelloReply.from_wire)
            try:
                self._c.hello = await future
            except HeraldError:
                pass
        finally:
            self._refreshing.set_result(None)
            self._refreshing = None
        assert self._c.hello is not None
        return self._c.hello

    def _connections(self) -> list[_Connection]:
        return [self._c, *(c for c in self._owners.values() if c is not None)]

    @classmethod
    async def connect(
        cls,
        host: str = "127.0.0.1",
        port: int = 7411,
        *,
        token: str | None = None,
        ssl: ssl_module.SSLContext | None = None,
        window: int = 4096,
        backoff: Backoff = Backoff(),
        routing: bool = True,
    ) -> AsyncClient:
        """Connects and says hello. `routing`: send each user's requests to its partition's owner when hello's
        routes name owners elsewhere (False: everything to this instance, which forwards)."""
        connection = _Connection(host, port, token=token, ssl=ssl, window=window, backoff=backoff)
        await connection.connect()
        return cls(connection, routing)

    @property
    def hello(self) -> HelloReply:
        assert self._c.hello is not None
        return self._c.hello

    @property
    def reconnects(self) -> int:
        return self._c.reconnects

    @property
    def in_flight(self) -> int:
        return sum(len(c.pending) for c in self._connections())

    def send(self, request: Request) -> Coroutine[Any, Any, asyncio.Future[Ack]]:
        """Sends a state-changing request once the window has room (await it); the future resolves to its ack or
        raises `HeraldError`. The connection's own coroutine is handed back: one coroutine a request, not two."""
        return self._target(request).send(request, _ack)

    async def request(self, request: Request) -> Ack:
        return await (await self.send(request))

    async def submit(self, submit: Submit) -> Ack:
        return await self.request(submit)

    async def withdraw(self, app: str, id: str, user: str | None = None) -> Ack:
        return await self.request(Withdraw(app=app, id=id, user=user))

    async def authorization(self, request: Authorization) -> Ack:
        return await self.request(request)

    async def settings(self, request: Settings) -> Ack:
        return await self.request(request)

    async def provisional_keep(self, request: ProvisionalKeep) -> Ack:
        return await self.request(request)

    async def provisional_turn_off(self, request: ProvisionalTurnOff) -> Ack:
        return await self.request(request)

    async def summary_schedule(self, request: SummarySchedule) -> Ack:
        return await self.request(request)

    async def focus_define(self, request: FocusDefine) -> Ack:
        return await self.request(request)

    async def focus_on(self, request: FocusOn) -> Ack:
        return await self.request(request)

    async def focus_off(self, request: FocusOff) -> Ack:
        return await self.request(request)

    async def mute(self, request: Mute) -> Ack:
        return await self.request(request)

    async def snooze(self, request: Snooze) -> Ack:
        return await self.request(request)

    async def opened(self, request: Opened) -> Ack:
        return await self.request(request)

    async def badge_clear(self, request: BadgeClear) -> Ack:
        return await self.request(request)

    async def register_app(self, app: str, entitlements: list[Any] | None = None) -> Ack:
        return await self.request(RegisterApp(app=app, entitlements=entitlements))

    async def clock(self, advance_to: Any) -> Ack:
        return await self.request(Clock(advance_to=advance_to))

    async def ping(self) -> Reply:
        result: Reply = await (await self._c.send({"op": "ping"}, _reply))
        return result

    async def stats(self) -> dict[str, Any]:
        result: dict[str, Any] = await (await self._c.send({"op": "stats"}, _raw))
        return result

    async def erase(self, user: str) -> Ack:
        """Admin: erases the user's stored notification content (SPEC §14); the ack carries the erasure event's seq."""
        return await self.request(Erase(user=user))

    async def consumers(self) -> ConsumersReply:
        """Admin: every durable consumer with its cursors, lag, filter and live members, then the ephemeral streams."""
        result: ConsumersReply = await (await self._c.send(Consumers(), ConsumersReply.from_wire))
        return result

    async def delete_consumer(self, consumer: str) -> DeleteConsumerReply:
        """Admin: closes the consumer's connections and removes its cursors; `NotFoundError` (`unknown_consumer`)
        for a name that does not exist."""
        result: DeleteConsumerReply = await (await self._c.send(DeleteConsumer(consumer=consumer), DeleteConsumerReply.from_wire))
        return result

    async def subscribe(
        self,
        consumer: str,
        from_: str | int = "committed",
        filter: dict[str, list[str]] | None = None,
        *,
        ack_every: int = 256,
        ack_interval: float = 0.2,
    ) -> AsyncSubscription:
        """A consumer on a connection of its own (one stream per connection), to the same server with the same token."""
        return await AsyncSubscription.open(
            self._c.host, self._c.port, consumer, from_, filter, token=self._c.token, ssl=self._c.ssl,
            backoff=self._c.backoff, ack_every=ack_every, ack_interval=ack_interval,
        )

    async def close(self) -> None:
        """Waits for every request in flight to be answered (or to fail), then closes."""
        # Until nothing is pending anywhere: a `not_owner` or an unreachable owner moves requests between connections.
        while True:
            pending = [p.future for c in self._connections() for p in c.pending] + list(self._moving)
            futures = [f if isinstance(f, asyncio.Future) else asyncio.wrap_future(f) for f in pending]
            if not futures:
                break
            await asyncio.gather(*futures, return_exceptions=True)
        for c in self._connections():
            await c.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class AsyncSubscription:
    """A consumer stream: iterate deliveries; acks are batched (every `ack_every` lines or `ack_interval` s, and on close).

    A delivery counts as processed once the iteration asks for the next one (or `ack(delivery)` is called).
    Cursors are kept per partition (SPEC §9): each ack names the partition its delivery line named. After a
    reconnect the stream resumes after the last acknowledged cursors; lines seen already are skipped.
    Several subscriptions under one name (in this process or others) form a group: the server divides
    the partitions among them.
    """

    def __init__(self, consumer: str, filter: dict[str, list[str]] | None, ack_every: int, ack_interval: float) -> None:
        self.consumer = consumer
        self.filter = filter
        self.ack_every = ack_every
        self.ack_interval = ack_interval
        self.queue: asyncio.Queue[Delivery | None] = asyncio.Queue()
        self.error: HeraldError | None = None
        self.room = asyncio.Event()
        self.room.set()
        self.start_from: str | int = "committed"
        # Per partition: the newest cursor handed to the user, the newest the user is done with,
        # the newest sent in an ack, and the newest the server confirmed.
        self.seen: dict[int, int] = {}
        self.processed: dict[int, int] = {}
        self.ack_sent: dict[int, int] = {}
        self.acknowledged: dict[int, int] = {}
        # Partitions whose lines named `partition` (their acks name it too; a one-partition server names none).
        self.named: set[int] = set()
        self.unacked_lines = 0
        self.last_yielded: Delivery | None = None
        self.last_ack: asyncio.Future[Any] | None = None
        self.started: asyncio.Future[int] | None = None
        self.c: _Connection
        self.timer: asyncio.Task[None] | None = None
        self.closed = False

    @property
    def acked(self) -> int | None:
        """The newest acknowledged cursor of partition 0 (of a one-partition server: the consumer's cursor)."""
        return self.acknowledged.get(0)

    @classmethod
    async def open(
        cls, host: str, port: int, consumer: str, from_: str | int, filter: dict[str, list[str]] | None, *,
        token: str | None = None, ssl: ssl_module.SSLContext | None = None, backoff: Backoff = Backoff(),
        ack_every: int = 256, ack_interval: float = 0.2,
    ) -> AsyncSubscription:
        sub = cls(consumer, filter, ack_every, ack_interval)
        sub.start_from = from_
        loop = asyncio.get_running_loop()
        sub.started = loop.create_future()
        sub.c = _Connection(host, port, token=token, ssl=ssl, window=1 << 30, backoff=backoff,
                            on_line=sub._line, on_connected=sub._subscribe_request,
                            backlogged=sub._backlogged, drained=sub.room.wait, on_ended=sub._ended)
        await sub.c.connect()
        await sub.started
        sub.timer = loop.create_task(sub._tick())
        return sub

    def _subscribe_request(self) -> list[_Pending]:
        """After each hello: with one partition, subscribe after its acknowledged cursor; with several, ack
        what was processed, then subscribe from the committed cursors (lines received twice are skipped)."""
        # The connection resends unanswered requests after these; a stale subscribe or ack among them is harmless.
        self.c.pending = collections.deque(p for p in self.c.pending if not p.line.startswith(b'{"op":"subscribe"'))
        first: list[_Pending] = []
        start: str | int = self.start_from
        if self.named:
            if self.started is not None and self.started.done():
                for p, cursor in sorted(self.processed.items()):
                    if cursor > self.acknowledged.get(p, -1):
                        first.append(self.c.make(*self._ack_request(p, cursor), _raw))
                start = "committed"
        elif 0 in self.acknowledged:
            start = self.acknowledged[0]
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        future.add_done_callback(self._subscribed)
        sub = Subscribe(consumer=self.consumer, from_=start, filter=self.filter)  # type: ignore[arg-type]
        return [*first, self.c.make(sub, future, _raw)]

    def _subscribed(self, future: asyncio.Future[Any]) -> None:
        if self.started is None or self.started.done():
            return
        if future.exception() is not None:
            self.started.set_exception(future.exception())  # type: ignore[arg-type]
        else:
            cursor = future.result().get("cursor")
            if isinstance(cursor, int) and 0 not in self.acknowledged:
                self.acknowledged[0] = cursor
            self.started.set_result(cursor if isinstance(cursor, int) else 0)

    def _line(self, obj: dict[str, Any]) -> None:
        if obj.get("op") != "delivery":
            return
        delivery = Delivery.from_wire(obj)
        p = delivery.partition or 0
        if "partition" in obj:
            self.named.add(p)
        if delivery.cursor <= self.seen.get(p, -1):
            return
        self.seen[p] = delivery.cursor
        self.queue.put_nowait(delivery)

    def _ended(self, error: HeraldError) -> None:
        # The connection will not come back (closed, revoked, taken over): wake the reader with the reason.
        if self.started is not None and not self.started.done():
            self.started.set_exception(error)
        self.error = error
        self.queue.put_nowait(None)

    def _backlogged(self) -> bool:
        if self.queue.qsize() >= _QUEUE_LINES:
            self.room.clear()
            return True
        return False

    def __aiter__(self) -> AsyncIterator[Delivery]:
        return self

    async def __anext__(self) -> Delivery:
        if self.last_yielded is not None:
            self.ack(self.last_yielded)
            self.last_yielded = None
        if self.closed:
            raise StopAsyncIteration
        if self.error is not None and self.queue.empty():
            raise self.error
        delivery = await self.queue.get()
        if delivery is None:
            self.queue.put_nowait(None)
            if self.closed or isinstance(self.error, ClientClosedError):
                raise StopAsyncIteration
            assert self.error is not None
            raise self.error
        if not self.room.is_set() and self.queue.qsize() < _QUEUE_LINES // 2:
            self.room.set()
        self.last_yielded = delivery
        return delivery

    async def next(self, timeout: float | None = None) -> Delivery:
        return await asyncio.wait_for(self.__anext__(), timeout)

    def ack(self, delivery: Delivery | int, partition: int = 0) -> None:
        """Marks a delivery (and every one before it in its partition) processed; the ack goes out with the
        next batch. A bare cursor belongs to `partition`."""
        p, cursor = (partition, delivery) if isinstance(delivery, int) else (delivery.partition or 0, delivery.cursor)
        if cursor > self.processed.get(p, -1):
            self.processed[p] = cursor
            self.unacked_lines += 1
            if self.unacked_lines >= self.ack_every:
                self.flush()

    def _ack_request(self, partition: int, cursor: int) -> tuple[AckCursor, asyncio.Future[Any]]:
        self.ack_sent[partition] = cursor
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.last_ack = future

        def done(f: asyncio.Future[Any]) -> None:
            if not f.cancelled() and f.exception() is None:
                stored = f.result().get("cursor", cursor)
                if isinstance(stored, int) and stored > self.acknowledged.get(partition, -1):
                    self.acknowledged[partition] = stored

        future.add_done_callback(done)
        return AckCursor(consumer=self.consumer, cursor=cursor, partition=partition if partition in self.named else None), future

    def flush(self) -> asyncio.Future[Any] | None:
        """Sends an ack for each partition's newest processed cursor newer than its last ack; returns the
        last of those acks' futures (replies come in order), or None when there was nothing to ack."""
        self.unacked_lines = 0
        last: asyncio.Future[Any] | None = None
        for p, cursor in sorted(self.processed.items()):
            if cursor <= self.ack_sent.get(p, -1):
                continue
            ack, last = self._ack_request(p, cursor)
            self.c.enqueue(ack, last, _raw)
        return last

    async def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        while not self.closed:
            await asyncio.sleep(self.ack_interval)
            self.flush()
            if self.c.writable and loop.time() - self.c.last_write > _KEEPALIVE:
                # The server closes a connection that sends no line for 5 minutes; a reading consumer pings.
                self.c.enqueue({"op": "ping"}, loop.create_future(), _raw)

    async def close(self) -> None:
        """Acks what was processed (and the last delivery handed out), waits for those acks, and closes."""
        if self.last_yielded is not None:
            self.ack(self.last_yielded)
            self.last_yielded = None
        # The newest ack sent, whether this flush or an earlier one (a batch that filled) sent it.
        self.flush()
        future = self.last_ack
        if future is not None and not future.done():
            try:
                await asyncio.wait_for(future, 10)
            except (HeraldError, asyncio.TimeoutError):
                pass
        # The acks' done callbacks (which record `acknowledged`) run on the loop's next turn.
        await asyncio.sleep(0)
        self.closed = True
        if self.timer is not None:
            self.timer.cancel()
        await self.c.close()

    async def __aenter__(self) -> AsyncSubscription:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
