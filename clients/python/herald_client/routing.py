"""Routing by partition (SPEC §9): the partition function, and which instance a request goes to by hello's routes."""

from __future__ import annotations

from typing import Any

from .models import HelloReply, Request, Route

_OFFSET_BASIS = 0xCBF29CE484222325
_PRIME = 0x100000001B3
_MASK = (1 << 64) - 1


def fnv1a64(data: bytes) -> int:
    """FNV-1a, 64-bit: offset basis 0xcbf29ce484222325, prime 0x100000001b3."""
    h = _OFFSET_BASIS
    for byte in data:
        h = ((h ^ byte) * _PRIME) & _MASK
    return h


def partition_of(user: str, partitions: int) -> int:
    """The partition of `user` among `partitions`: fnv1a64 of its UTF-8 bytes modulo P (0 when P is 1)."""
    if partitions <= 1:
        return 0
    return fnv1a64(user.encode("utf-8")) % partitions


def routing_user(request: Request | dict[str, Any]) -> str | None:
    """The user whose partition a request belongs to; None for requests any instance takes (registerApp,
    clock, stats, a withdraw without `user`) and for fan-outs across users (the connected instance forwards)."""
    if isinstance(request, dict):
        user, users = request.get("user"), request.get("users")
    else:
        user, users = getattr(request, "user", None), getattr(request, "users", None)
    return user if isinstance(user, str) and not users else None


def owner_address(reply: dict[str, Any]) -> str | None:
    """The owner's address a `not_owner` error names (in `error`, or beside it), if it names one."""
    for where in (reply.get("error"), reply):
        if isinstance(where, dict):
            for key in ("owner", "address"):
                value = where.get(key)
                if isinstance(value, str) and ":" in value:
                    return value
    return None


class RoutingTable:
    """hello's `partitions`, `hash` and `routes` as seen from the instance connected to (`connected`, host:port).

    `address_for(user)` is the owner's address when a user's partition is owned elsewhere, else None: send to
    the connected instance (it owns the partition, or it forwards). Only a partition function this client
    knows (fnv1a64) can pick an owner; with another, or without routes, everything goes to the connected one.
    """

    def __init__(self, partitions: int, hash: str | None, routes: list[Route], connected: str) -> None:
        self.partitions = max(1, partitions)
        self.hash = hash
        self.connected = connected
        self.owners: dict[int, str] = {r.partition: r.address for r in routes}
        self.direct = (
            self.partitions > 1
            and (hash is None or hash == "fnv1a64")
            and any(address != connected for address in self.owners.values())
        )
        self._cache: dict[str, int] = {}

    @classmethod
    def from_hello(cls, hello: HelloReply, connected: str) -> RoutingTable:
        return cls(hello.partitions, hello.hash, hello.routes, connected)

    def partition_of(self, user: str) -> int:
        p = self._cache.get(user)
        if p is None:
            p = partition_of(user, self.partitions)
            if len(self._cache) >= 65_536:
                self._cache.clear()
            self._cache[user] = p
        return p

    def address_for(self, user: str | None) -> str | None:
        """Where a request for `user` goes: an owner's address, or None for the connected instance."""
        if not self.direct or user is None:
            return None
        address = self.owners.get(self.partition_of(user))
        return None if address is None or address == self.connected else address

    def with_owner(self, partition: int, address: str) -> RoutingTable:
        """This table with `partition` owned at `address` (what a `not_owner` error said)."""
        routes = [Route(p, a) for p, a in self.owners.items() if p != partition] + [Route(partition, address)]
        return RoutingTable(self.partitions, self.hash, routes, self.connected)
