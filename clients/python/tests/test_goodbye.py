"""A `goodbye` line is a reconnect: the client resends only what the stopping server did not answer.

The server sends `goodbye` once issue 42 lands; until then a stand-in speaks the lines of SPEC §5
over real TCP: it reads five requests, says goodbye, answers those five and closes.
"""

from __future__ import annotations

import asyncio
import json

from herald_client import AsyncClient, Backoff, Submit


def test_a_goodbye_is_a_reconnect_that_resends_what_was_not_answered() -> None:
    received: list[list[str]] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        ids: list[str] = []
        received.append(ids)
        first = len(received) == 1
        answered = 0
        while True:
            line = await reader.readline()
            if not line:
                break
            request = json.loads(line)
            if request["op"] == "hello":
                writer.write(json.dumps({"ok": True, "op": "hello", "rid": request.get("rid"), "roles": ["producer"],
                                         "apps": ["*"], "server": "stand-in"}).encode() + b"\n")
                continue
            ids.append(request["id"])
            reply = {"ok": True, "rid": request.get("rid"), "seq": int(request["id"]), "warnings": []}
            if first and len(ids) == 5:
                writer.write(b'{"op":"goodbye","reason":"stopping"}\n')
            writer.write(json.dumps(reply).encode() + b"\n")
            answered += 1
            if first and answered == 5:
                await writer.drain()
                writer.close()
                return
        writer.close()

    async def run() -> None:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with await AsyncClient.connect("127.0.0.1", port, backoff=Backoff(0.01, 0.05)) as client:
            futures = [await client.send(Submit(id=str(i), app="a", user="u")) for i in range(1, 11)]
            acks = await asyncio.wait_for(asyncio.gather(*futures), 10)
            assert [a.seq for a in acks] == list(range(1, 11))
            assert client.reconnects == 1
        server.close()
        await server.wait_closed()

    asyncio.run(run())
    assert received[0][:5] == ["1", "2", "3", "4", "5"]
    assert received[1] == [str(i) for i in range(6, 11)]
