"""Starts real `herald serve` processes (manual clock, a private PostgreSQL under a temp dir) for the tests."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

try:
    import herald_client  # noqa: F401  (installed, or on PYTHONPATH)
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

REPO = Path(__file__).resolve().parents[3]
BINARY = os.environ.get("HERALD_BINARY") or str(
    REPO / ".build/debug/herald"
)

ADMIN_TOKEN = "admin-token-for-tests"
PRODUCER_TOKEN = "producer-token-for-tests"
TOKENS = {
    "tokens": [
        {"name": "admin", "token": ADMIN_TOKEN, "roles": ["producer", "settings", "consumer", "admin"],
         "apps": ["com.example.allowed", "com.example.roundtrip", "com.example.resend", "com.example.consumer"]},
        {"name": "producer", "token": PRODUCER_TOKEN, "roles": ["producer"], "apps": ["com.example.allowed"]},
    ]
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class HeraldServer:
    """One `herald serve` on a free port; `kill9()` and `start()` restart it on the same port and database."""

    def __init__(self, cwd: Path, database: str, extra: list[str] | None = None) -> None:
        self.extra = extra or []
        self.cwd = cwd
        self.database = database
        self.host = "127.0.0.1"
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.log = cwd / f"{database}.log"
        (cwd / "tokens.json").write_text(json.dumps(TOKENS))

    @property
    def addr(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, fresh: bool = False) -> None:
        args = [BINARY, "serve", "--listen", self.addr, "--clock", "manual", "--start", "2026-03-27T07:00:00Z",
                "--private-database", self.database, "--tokens", "tokens.json", *self.extra]
        if fresh:
            args.append("--fresh-private-database")
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(args, cwd=self.cwd, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"herald serve exited with {self.process.returncode}:\n{self.log.read_text()[-3000:]}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"herald serve did not listen within 120 s:\n{self.log.read_text()[-3000:]}")

    def kill9(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture(scope="session")
def cluster_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One temp dir, so one private PostgreSQL cluster, for every server of the session; stopped at the end."""
    path = tmp_path_factory.mktemp("herald")
    yield path
    pid_file = path / ".herald" / "postgres" / "postmaster.pid"
    if pid_file.exists():
        try:
            os.kill(int(pid_file.read_text().split()[0]), signal.SIGTERM)
        except (OSError, ValueError):
            pass


def start_server(cluster_dir: Path, name: str, extra: list[str] | None = None) -> Iterator[HeraldServer]:
    server = HeraldServer(cluster_dir, f"pyclient_{name}_{os.getpid()}", extra)
    server.start(fresh=True)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def server(cluster_dir: Path, request: pytest.FixtureRequest) -> Iterator[HeraldServer]:
    yield from start_server(cluster_dir, request.module.__name__.rsplit(".", 1)[-1])
