"""Routing by partition: the partition function against the shared fixture, the routing table, and real servers."""

from __future__ import annotations

import json
import os
import subprocess
import time
import unicodedata
from pathlib import Path

import pytest
from conftest import ADMIN_TOKEN, BINARY, HeraldServer, free_port, start_server

from herald_client import (
    AsyncClient,
    Authorization,
    Backoff,
    Client,
    Delivery,
    HelloReply,
    Route,
    RoutingTable,
    Submit,
    Subscription,
    Withdraw,
    fnv1a64,
    partition_of,
    routing_user,
)
from herald_client.routing import owner_address

APP = "com.example.allowed"
FIXTURE = json.loads((Path(__file__).resolve().parents[2] / "testdata" / "partitions.json").read_text(encoding="utf-8"))
# The fixture's users a server takes: not empty, and in NFC (the server refuses other spellings of a name).
SERVER_CASES = [c for c in FIXTURE["cases"] if c["user"] and unicodedata.normalize("NFC", c["user"]) == c["user"]]


@pytest.mark.parametrize("case", FIXTURE["cases"], ids=lambda c: repr(c["user"])[:24])
def test_a_users_partition_is_the_fixtures(case: dict[str, object]) -> None:
    user = case["user"]
    assert isinstance(user, str)
    assert f"{fnv1a64(user.encode('utf-8')):016x}" == case["fnv1a64"]
    partitions = case["partitions"]
    assert isinstance(partitions, dict)
    for p, expected in partitions.items():
        assert partition_of(user, int(p)) == expected, (user, p)


def test_the_fixture_covers_empty_and_non_ascii_users_and_every_partition_count() -> None:
    users = [c["user"] for c in FIXTURE["cases"]]
    assert "" in users and any(not u.isascii() for u in users)
    assert FIXTURE["partitionCounts"] == [1, 4, 16, 1024]


def hello(partitions: int, routes: object, hash: str = "fnv1a64") -> HelloReply:
    return HelloReply.from_wire({"ok": True, "op": "hello", "partitions": partitions, "hash": hash, "routes": routes})


def users_in(partition: int, partitions: int) -> str:
    return next(c["user"] for c in FIXTURE["cases"] if c["partitions"][str(partitions)] == partition)


def test_routes_send_each_users_requests_to_its_partitions_owner() -> None:
    table = RoutingTable.from_hello(hello(4, [
        {"partition": 0, "address": "a:1", "epoch": 1}, {"partition": 1, "address": "b:1", "epoch": 1},
        {"partition": 2, "address": "a:1", "epoch": 2}, {"partition": 3, "address": "c:1", "epoch": 1},
    ]), connected="a:1")
    assert table.direct
    assert table.address_for(users_in(0, 4)) is None  # owned by the instance connected to
    assert table.address_for(users_in(1, 4)) == "b:1"
    assert table.address_for(users_in(2, 4)) is None
    assert table.address_for(users_in(3, 4)) == "c:1"
    assert table.address_for(None) is None  # no user: the connected instance forwards
    moved = table.with_owner(1, "c:1")
    assert moved.address_for(users_in(1, 4)) == "c:1" and moved.address_for(users_in(0, 4)) is None


def test_one_partition_or_routes_naming_only_the_connected_instance_route_nothing() -> None:
    single = RoutingTable.from_hello(hello(1, [{"partition": 0, "address": "a:1", "epoch": 3}]), connected="a:1")
    assert not single.direct and single.address_for("alice") is None
    local = RoutingTable.from_hello(hello(4, {str(p): {"address": "a:1", "epoch": 1} for p in range(4)}), connected="a:1")
    assert not local.direct and all(local.address_for(users_in(p, 4)) is None for p in range(4))
    # A partition function this client does not know: the connected instance forwards everything.
    other = RoutingTable.from_hello(hello(4, ["a:1", "b:1", "b:1", "b:1"], hash="murmur3"), connected="a:1")
    assert not other.direct and other.address_for(users_in(1, 4)) is None
    assert RoutingTable.from_hello(HelloReply.from_wire({"ok": True}), "a:1").partitions == 1


def test_routes_are_read_as_a_list_or_an_object_keyed_by_partition() -> None:
    listed = hello(2, [{"partition": 1, "address": "b:1", "epoch": 5}, {"partition": 0, "address": "a:1", "epoch": 3}])
    assert listed.routes == [Route(0, "a:1", 3), Route(1, "b:1", 5)]
    keyed = hello(2, {"1": {"address": "b:1"}, "0": {"address": "a:1"}})
    assert [r.address for r in keyed.routes] == ["a:1", "b:1"]


def test_requests_route_by_their_user_and_fan_outs_and_admin_ops_do_not() -> None:
    assert routing_user(Submit(id="1", app=APP, user="alice")) == "alice"
    assert routing_user(Submit(id="1", app=APP, users=["alice", "bob"])) is None
    assert routing_user(Withdraw(app=APP, id="1")) is None
    assert routing_user(Withdraw(app=APP, id="1", user="bob")) == "bob"
    assert routing_user({"op": "stats"}) is None
    assert owner_address({"ok": False, "error": {"code": "not_owner", "owner": "b:7411"}}) == "b:7411"
    assert owner_address({"ok": False, "error": {"code": "not_owner", "title": "t"}}) is None


def test_with_one_partition_the_routes_name_the_connected_instance_and_no_other_connection_opens(server: HeraldServer) -> None:
    with Client.connect(server.host, server.port, token=ADMIN_TOKEN) as c:
        assert c.hello.partitions == 1 and c.hello.hash == "fnv1a64"
        assert [r.address for r in c.hello.routes] == [server.addr]
        c.register_app(APP)
        acks = [c.submit(Submit(id=f"route-{i}", app=APP, user=case["user"], title="Hi",
                                hidden_previews_body_placeholder="Hi")) for i, case in enumerate(SERVER_CASES)]
        assert all(f.result(30).partition == 0 for f in acks)
        assert not c.routes.direct and c._a._owners == {}
        assert c.refresh_routes().routes == c.hello.routes


def drain(subscription: Subscription, quiet: float = 1.5) -> list[Delivery]:
    """Every delivery that comes until none has for `quiet` seconds (the first waited for up to 30 s)."""
    lines: list[Delivery] = []
    try:
        lines.append(subscription.next(30))
        while True:
            lines.append(subscription.next(quiet))
    except TimeoutError:
        return lines


class PartitionedDeployment:
    """`herald migrate --partitions 4`, then two `herald serve` instances on it (skips while serve refuses P > 1)."""

    def __init__(self, cluster_dir: Path) -> None:
        self.database = f"pyclient_partitions_{os.getpid()}"
        migrate = subprocess.run([BINARY, "migrate", "--private-database", self.database, "--partitions", "4"],
                                 cwd=cluster_dir, capture_output=True, text=True, timeout=300)
        assert migrate.returncode == 0, migrate.stderr
        self.servers: list[HeraldServer] = []
        for name in ("a", "b"):
            port = free_port()
            # Members forward to each other with a token the others accept (here the admin one).
            (cluster_dir / "peer-token").write_text(ADMIN_TOKEN)
            s = HeraldServer(cluster_dir, self.database, ["--instance", name, "--advertise", f"127.0.0.1:{port}",
                                                          "--peer-token-file", "peer-token"])
            s.port = port
            self.servers.append(s)
            try:
                s.start()
            except RuntimeError as e:
                self.stop()
                said = [line for line in str(e).splitlines() if "partitions" in line]
                if said:
                    pytest.skip("herald serve does not serve a database of 4 partitions yet: " + said[-1][-300:])
                raise

    def stop(self) -> None:
        for s in self.servers:
            s.stop()


def test_with_four_partitions_on_two_instances_each_user_is_acked_in_its_partition(cluster_dir: Path) -> None:
    deployment = PartitionedDeployment(cluster_dir)
    try:
        a, b = deployment.servers
        with Client.connect(a.host, a.port, token=ADMIN_TOKEN) as c:
            deadline = time.monotonic() + 30
            while {r.address for r in c.hello.routes} != {a.addr, b.addr} and time.monotonic() < deadline:
                time.sleep(0.5)
                c.refresh_routes()
            assert c.hello.partitions == 4 and {r.address for r in c.hello.routes} == {a.addr, b.addr}, c.hello.routes
            c.register_app(APP)
            cases = SERVER_CASES
            for case in cases:
                c.authorization(Authorization(user=case["user"], app=APP, status="authorized", options=["alert"]))
            futures = [c.submit(Submit(id=f"p-{i}", app=APP, user=case["user"], title="Hi", hidden_previews_body_placeholder="Hi"))
                       for i, case in enumerate(cases)]
            for case, future in zip(cases, futures):
                assert future.result(60).partition == case["partitions"]["4"], case["user"]
            # Users of partitions owned by b went on a connection to b.
            assert set(c._a._owners) == {b.addr} and c._a._owners[b.addr] is not None

            # A consumer group across the two instances: each subscription streams its share of the
            # partitions, none twice; when one closes, the other streams every partition.
            # Balanced first (two partitions each), so that no partition moves while the group streams.
            deadline = time.monotonic() + 30
            while sorted([r.address for r in c.refresh_routes().routes].count(x) for x in (a.addr, b.addr)) != [2, 2]:
                assert time.monotonic() < deadline, c.hello.routes
                time.sleep(0.2)
            with Client.connect(b.host, b.port, token=ADMIN_TOKEN) as d:
                members = [c.subscribe("across", ack_every=1), d.subscribe("across", ack_every=1)]
                submitted = [c.submit(Submit(id=f"g-{i}", app=APP, user=case["user"], title="Hi", hidden_previews_body_placeholder="Hi"))
                             for i, case in enumerate(cases)]
                for f in submitted:
                    f.result(60)
                got = [drain(m) for m in members]
                # Judged on the lines submitted once both had joined: an earlier delivery the first
                # member received alone, unacknowledged, goes to the partition's new streamer again
                # (at least once), so a partition's older lines may reach both.
                shares = [{x.partition for x in lines if (x.notification or "").startswith("g-")} for lines in got]
                assert not shares[0] & shares[1] and shares[0] and shares[1], shares
                # (A new consumer starts at each partition's head: earlier submits' deliveries committed
                # after it subscribed come too.)
                ours = sorted(x.notification for lines in got for x in lines if (x.notification or "").startswith("g-"))
                assert ours == sorted(f"g-{i}" for i in range(len(cases)))
                members[1].close()
                submitted = [c.submit(Submit(id=f"h-{i}", app=APP, user=case["user"], title="Hi", hidden_previews_body_placeholder="Hi"))
                             for i, case in enumerate(cases)]
                for f in submitted:
                    f.result(60)
                rest = drain(members[0])
                assert {x.notification for x in rest} >= {f"h-{i}" for i in range(len(cases))}
                assert {x.partition for x in rest} == set(range(4))
                members[0].close()
    finally:
        deployment.stop()


def test_the_async_producer_without_routing_sends_everything_to_the_connected_instance(server: HeraldServer) -> None:
    import asyncio

    async def run() -> None:
        async with await AsyncClient.connect(server.host, server.port, token=ADMIN_TOKEN, routing=False) as c:
            await c.register_app(APP)
            ack = await c.submit(Submit(id="unrouted", app=APP, user="Zoë", title="Hi", hidden_previews_body_placeholder="Hi"))
            assert ack.partition == 0 and c._owners == {}

    asyncio.run(run())


def psql(cluster_dir: Path, database: str, sql: str) -> str:
    """Runs SQL on a server's private database (the cluster under `cluster_dir`, trust auth as postgres)."""
    port = (cluster_dir / ".herald" / "postgres" / "postmaster.pid").read_text().splitlines()[3].strip()
    done = subprocess.run(["psql", f"postgresql://postgres@127.0.0.1:{port}/{database}", "-XAtq", "-c", sql],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_submit_refused_with_not_owner_is_sent_again_once_the_partition_is_served(cluster_dir: Path, server: HeraldServer) -> None:
    with Client.connect(server.host, server.port, token=ADMIN_TOKEN, backoff=Backoff(0.05, 0.5)) as c:
        c.register_app(APP)
        # Another instance takes the partition: the next append is refused (`not_owner`) and this
        # instance stops; started again, it takes the partition back.
        psql(cluster_dir, server.database, "UPDATE partitions SET epoch = epoch + 1, owner = 'other', address = '127.0.0.1:1' WHERE partition = 0")
        future = c.submit(Submit(id="fenced-1", app=APP, user="fenced", title="Hi", hidden_previews_body_placeholder="Hi"))
        assert server.process is not None
        server.process.wait(60)
        server.start()
        ack = future.result(60)
        assert ack.seq > 0 and not ack.duplicate
        assert c._a.not_owner_resends == 1
    assert psql(cluster_dir, server.database, "SELECT count(*) FROM events WHERE notification_id = 'fenced-1'") == "1"


def test_an_owner_that_cannot_be_reached_leaves_its_requests_to_the_connected_instance(server: HeraldServer) -> None:
    import asyncio

    dead = f"127.0.0.1:{free_port()}"

    async def run() -> None:
        async with await AsyncClient.connect(server.host, server.port, token=ADMIN_TOKEN, backoff=Backoff(0.01, 0.05)) as c:
            await c.register_app(APP)
            # Routes as a server of four partitions would give them: 1 and 3 owned at an address where nothing listens.
            assert c._c.hello is not None
            c._c.hello = hello(4, [{"partition": p, "address": server.addr if p % 2 == 0 else dead, "epoch": 1} for p in range(4)])
            users = [users_in(p, 4) or "x" for p in range(4)]
            acks = await asyncio.gather(*[await c.send(Submit(id=f"dead-{i}", app=APP, user=u, title="Hi", hidden_previews_body_placeholder="Hi"))
                                          for i, u in enumerate(users)])
            assert all(a.seq > 0 for a in acks)
            assert c._owners == {dead: None}
            # Later requests for those users go to the connected instance at once.
            assert (await c.submit(Submit(id="dead-later", app=APP, user=users[1], title="Hi", hidden_previews_body_placeholder="Hi"))).seq > 0

    asyncio.run(run())


def test_requests_for_partitions_owned_elsewhere_go_on_a_connection_to_their_owner(cluster_dir: Path, server: HeraldServer) -> None:
    import asyncio

    serving = start_server(cluster_dir, "routing_owner")
    owner = next(serving)
    try:
        async def run() -> None:
            async with await AsyncClient.connect(owner.host, owner.port, token=ADMIN_TOKEN, routing=False) as o:
                await o.register_app(APP)
            async with await AsyncClient.connect(server.host, server.port, token=ADMIN_TOKEN) as c:
                await c.register_app(APP)
                assert c._c.hello is not None
                # Routes as a server of four partitions would give them: 1 and 3 owned by the other server.
                c._c.hello = hello(4, [{"partition": p, "address": server.addr if p % 2 == 0 else owner.addr, "epoch": 1} for p in range(4)])
                users = [users_in(p, 4) or "x" for p in range(4)]
                for i, u in enumerate(users):
                    await c.submit(Submit(id=f"owned-{i}", app=APP, user=u, title="Hi", hidden_previews_body_placeholder="Hi"))
                assert list(c._owners) == [owner.addr]
                await c.register_app(APP)  # no user: the connected instance
            # Each submit was stored where its partition's owner is: sent there again, it is a duplicate.
            for addr, stored in ((server, {0, 2}), (owner, {1, 3})):
                async with await AsyncClient.connect(addr.host, addr.port, token=ADMIN_TOKEN, routing=False) as d:
                    for i, u in enumerate(users):
                        again = await d.submit(Submit(id=f"owned-{i}", app=APP, user=u, title="Hi", hidden_previews_body_placeholder="Hi"))
                        assert again.duplicate == (i in stored), (addr.addr, i)

        asyncio.run(run())
    finally:
        serving.close()
