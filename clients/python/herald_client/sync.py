"""The blocking producer (`Client`) and consumer (`Subscription`): the asyncio client run on a thread of its own."""

from __future__ import annotations

import asyncio
import concurrent.futures
import ssl as ssl_module
import threading
from typing import Any, Coroutine, Iterator, TypeVar

from .aio import AsyncClient, AsyncSubscription, Backoff, _ack
from .errors import ClientClosedError
from .routing import RoutingTable
from .models import (
    Ack,
    Authorization,
    BadgeClear,
    Clock,
    ConsumersReply,
    DeleteConsumerReply,
    Delivery,
    Erase,
    FocusDefine,
    FocusOff,
    FocusOn,
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
    SummarySchedule,
    Withdraw,
)

T = TypeVar("T")


class _LoopThread:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="herald-client", daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        if not self.thread.is_alive():
            self.loop.close()


class Client:
    """A producer on one connection. `send` (and `submit`) return a future at once — blocking only while the
    window is full — and `.result()` gives the ack or raises `HeraldError`; the other ops wait for their ack.

    ```
    with Client.connect("127.0.0.1", 7411, token="…") as client:
        futures = [client.submit(Submit(id=f"n{i}", app="a", user="u", title="Hi")) for i in range(1000)]
        acks = [f.result() for f in futures]
    ```
    """

    def __init__(self, runner: _LoopThread, client: AsyncClient, window: int) -> None:
        self._runner = runner
        self._a = client
        self._window = threading.BoundedSemaphore(window)
        self._closed = False
        # Requests handed to the loop's thread: one wake-up for all those sent while it was busy.
        self._handoff: list[tuple[Request, concurrent.futures.Future[Ack]]] = []
        self._handoff_lock = threading.Lock()

    @classmethod
    def connect(
        cls,
        host: str = "127.0.0.1",
        port: int = 7411,
        *,
        token: str | None = None,
        ssl: ssl_module.SSLContext | None = None,
        window: int = 4096,
        backoff: Backoff = Backoff(),
        timeout: float | None = 30,
        routing: bool = True,
    ) -> Client:
        """Connects and says hello; `routing` as in `AsyncClient.connect`."""
        runner = _LoopThread()
        try:
            client = runner.run(AsyncClient.connect(host, port, token=token, ssl=ssl, window=window, backoff=backoff,
                                                    routing=routing), timeout)
        except BaseException:
            runner.stop()
            raise
        return cls(runner, client, window)

    @property
    def hello(self) -> HelloReply:
        return self._a.hello

    @property
    def reconnects(self) -> int:
        return self._a.reconnects

    @property
    def routes(self) -> RoutingTable:
        """The routing table of the latest hello."""
        return self._a.routes

    def refresh_routes(self) -> HelloReply:
        """Says hello again to the instance connected to, for the latest routes."""
        return self._runner.run(self._a.refresh_routes())

    def send(self, request: Request) -> concurrent.futures.Future[Ack]:
        """Sends a state-changing request (blocks while `window` requests are unanswered); returns its ack's future."""
        if self._closed:
            raise ClientClosedError()
        self._window.acquire()
        future: concurrent.futures.Future[Ack] = concurrent.futures.Future()
        future.add_done_callback(lambda _: self._window.release())
        with self._handoff_lock:
            self._handoff.append((request, future))
            wake = len(self._handoff) == 1
        if wake:
            self._runner.loop.call_soon_threadsafe(self._dispatch_handoff)
        return future

    def _dispatch_handoff(self) -> None:
        """On the loop's thread: queues, in order, every request handed over since the last wake-up."""
        with self._handoff_lock:
            requests, self._handoff = self._handoff, []
        for request, future in requests:
            try:
                self._a._dispatch(request, future, _ack)
            except Exception as e:  # a request that cannot be written (a value JSON has no form for)
                if not future.done():
                    future.set_exception(e)

    def submit(self, submit: Submit) -> concurrent.futures.Future[Ack]:
        return self.send(submit)

    def request(self, request: Request, timeout: float | None = None) -> Ack:
        return self.send(request).result(timeout)

    def withdraw(self, app: str, id: str, user: str | None = None) -> Ack:
        return self.request(Withdraw(app=app, id=id, user=user))

    def authorization(self, request: Authorization) -> Ack:
        return self.request(request)

    def settings(self, request: Settings) -> Ack:
        return self.request(request)

    def provisional_keep(self, request: ProvisionalKeep) -> Ack:
        return self.request(request)

    def provisional_turn_off(self, request: ProvisionalTurnOff) -> Ack:
        return self.request(request)

    def summary_schedule(self, request: SummarySchedule) -> Ack:
        return self.request(request)

    def focus_define(self, request: FocusDefine) -> Ack:
        return self.request(request)

    def focus_on(self, request: FocusOn) -> Ack:
        return self.request(request)

    def focus_off(self, request: FocusOff) -> Ack:
        return self.request(request)

    def mute(self, request: Mute) -> Ack:
        return self.request(request)

    def snooze(self, request: Snooze) -> Ack:
        return self.request(request)

    def opened(self, request: Opened) -> Ack:
        return self.request(request)

    def badge_clear(self, request: BadgeClear) -> Ack:
        return self.request(request)

    def register_app(self, app: str, entitlements: list[Any] | None = None) -> Ack:
        return self.request(RegisterApp(app=app, entitlements=entitlements))

    def clock(self, advance_to: Any) -> Ack:
        return self.request(Clock(advance_to=advance_to))

    def ping(self) -> Reply:
        return self._runner.run(self._a.ping())

    def stats(self) -> dict[str, Any]:
        return self._runner.run(self._a.stats())

    def erase(self, user: str) -> Ack:
        """Admin: erases the user's stored notification content (SPEC §14); the ack carries the erasure event's seq."""
        return self.request(Erase(user=user))

    def consumers(self) -> ConsumersReply:
        """Admin: every durable consumer with its cursors, lag, filter and live members, then the ephemeral streams."""
        return self._runner.run(self._a.consumers())

    def delete_consumer(self, consumer: str) -> DeleteConsumerReply:
        """Admin: closes the consumer's connections and removes its cursors (`NotFoundError` for an unknown name)."""
        return self._runner.run(self._a.delete_consumer(consumer))

    def subscribe(
        self,
        consumer: str,
        from_: str | int = "committed",
        filter: dict[str, list[str]] | None = None,
        *,
        ack_every: int = 256,
        ack_interval: float = 0.2,
    ) -> Subscription:
        """A consumer on a connection of its own; it shares this client's thread."""
        sub = self._runner.run(self._a.subscribe(consumer, from_, filter, ack_every=ack_every, ack_interval=ack_interval))
        return Subscription(self._runner, sub)

    def close(self) -> None:
        """Waits for every request in flight to be answered (or to fail), then closes."""
        if self._closed:
            return
        self._closed = True
        try:
            self._runner.run(self._a.close(), 60)
        finally:
            self._runner.stop()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Subscription:
    """A blocking consumer stream: `for delivery in subscription`; acks batched as in `AsyncSubscription`."""

    def __init__(self, runner: _LoopThread, sub: AsyncSubscription) -> None:
        self._runner = runner
        self._s = sub

    @property
    def consumer(self) -> str:
        return self._s.consumer

    @property
    def acked(self) -> int | None:
        """The newest cursor the server confirmed as acknowledged (of partition 0)."""
        return self._s.acked

    @property
    def acknowledged(self) -> dict[int, int]:
        """The newest cursor the server confirmed as acknowledged, per partition."""
        return dict(self._s.acknowledged)

    def __iter__(self) -> Iterator[Delivery]:
        return self

    def __next__(self) -> Delivery:
        try:
            return self._runner.run(self._s.__anext__())
        except StopAsyncIteration:
            raise StopIteration from None

    def next(self, timeout: float | None = None) -> Delivery:
        """The next delivery, or `TimeoutError` after `timeout` seconds."""
        return self._runner.run(self._s.next(timeout))

    def ack(self, delivery: Delivery | int, partition: int = 0) -> None:
        self._runner.loop.call_soon_threadsafe(self._s.ack, delivery, partition)

    def close(self) -> None:
        self._runner.run(self._s.close(), 30)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
