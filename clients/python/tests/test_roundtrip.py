"""`python3 -m herald_client.roundtrip` against a real server prints its line and exits 0."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import ADMIN_TOKEN, HeraldServer


def test_the_roundtrip_module_prints_its_line(server: HeraldServer) -> None:
    env = {**os.environ, "HERALD_ADDR": server.addr, "HERALD_TOKEN": ADMIN_TOKEN, "N": "1000",
           "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    done = subprocess.run([sys.executable, "-m", "herald_client.roundtrip"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "roundtrip: 1000 acked, 1000 delivered"


def test_the_roundtrip_module_fails_with_the_error_on_a_wrong_token(server: HeraldServer) -> None:
    env = {**os.environ, "HERALD_ADDR": server.addr, "HERALD_TOKEN": "wrong-token", "N": "10",
           "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    done = subprocess.run([sys.executable, "-m", "herald_client.roundtrip"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "invalid_token" in done.stderr
