"""The clients speak TLS to a server with a certificate from a throwaway CA (made with openssl at test time)."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
from pathlib import Path
from typing import Iterator

import pytest
from conftest import ADMIN_TOKEN, HeraldServer, start_server

from herald_client import AsyncClient, Authorization, Client, Submit

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl program")


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("tls")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", str(d / "ca.key"), "-out", str(d / "ca.pem"), "-days", "2", "-subj", "/CN=Herald Test CA")
    (d / "server.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    openssl("req", *ec, "-keyout", str(d / "server.key"), "-out", str(d / "server.csr"), "-subj", "/CN=127.0.0.1")
    openssl("x509", "-req", "-in", str(d / "server.csr"), "-CA", str(d / "ca.pem"), "-CAkey", str(d / "ca.key"),
            "-set_serial", "4242", "-days", "2", "-extfile", str(d / "server.ext"), "-out", str(d / "server.pem"))
    return d


@pytest.fixture(scope="module")
def tls_server(cluster_dir: Path, certificates: Path) -> Iterator[HeraldServer]:
    yield from start_server(cluster_dir, "tls", ["--tls-cert", str(certificates / "server.pem"),
                                                 "--tls-key", str(certificates / "server.key")])


def test_the_clients_round_trip_over_tls(tls_server: HeraldServer, certificates: Path) -> None:
    context = ssl.create_default_context(cafile=str(certificates / "ca.pem"))
    with Client.connect(tls_server.host, tls_server.port, token=ADMIN_TOKEN, ssl=context) as c:
        c.register_app("com.example.allowed")
        c.authorization(Authorization(user="tls", app="com.example.allowed", status="authorized", options=["alert"]))
        sub = c.subscribe("tls-consumer")
        ack = c.submit(Submit(id="tls-1", app="com.example.allowed", user="tls", title="Over TLS",
                              hidden_previews_body_placeholder="TLS")).result(30)
        assert ack.seq > 0
        assert sub.next(30).notification == "tls-1"
        sub.close()

    async def run() -> None:
        async with await AsyncClient.connect(tls_server.host, tls_server.port, token=ADMIN_TOKEN, ssl=context) as a:
            assert (await a.ping()).raw["op"] == "pong"

    asyncio.run(run())


def test_an_untrusted_server_certificate_is_refused(tls_server: HeraldServer) -> None:
    with pytest.raises(ssl.SSLCertVerificationError):
        Client.connect(tls_server.host, tls_server.port, token=ADMIN_TOKEN, ssl=ssl.create_default_context())
