"""kill -9 of a writer in the middle of a stream of checkpoints, then reopen (both backends)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from actors.core.messages import pairing_problems
from actors.store import SessionStore
from tests.support.children import read_line
from tests.support.stores import Stores

pytestmark = pytest.mark.slow  # every test here starts a Python process

REPO = Path(__file__).resolve().parents[2]


def _run_and_kill(stores: Stores, memory_dir: Path, sid: str, delay: float) -> int:
    """Start a writer, let it run ``delay`` seconds, SIGKILL it; return the last ack seen."""
    with subprocess.Popen(
        [sys.executable, "-m", "tests.support.programs.store_writer", str(memory_dir), sid],
        cwd=REPO, stdout=subprocess.PIPE, text=True, env={**os.environ, **stores.env},
    ) as proc:
        assert proc.stdout is not None
        first = read_line(proc.stdout)  # wait until it writes at all
        assert first.startswith("ack ")
        last = int(first.split()[1])
        deadline = time.monotonic() + delay
        while time.monotonic() < deadline:
            line = read_line(proc.stdout)
            if line.startswith("ack "):
                last = int(line.split()[1])
        proc.send_signal(signal.SIGKILL)
        for line in proc.stdout:  # acks already printed before the kill count too
            if line.startswith("ack "):
                last = int(line.split()[1])
    return last


def test_every_acknowledged_checkpoint_survives_kill_9(stores: Stores, memory_dir: Path) -> None:
    rng = random.Random(7)
    sid = "crashtest"
    acked = 0
    for _ in range(5):
        acked = _run_and_kill(stores, memory_dir, sid, rng.uniform(0.05, 0.4))
        store = stores.open(memory_dir)
        record = store.load_session(sid)
        messages = record["messages"]
        assert len(messages) >= acked
        assert record["state"]["n"] == len(messages)  # messages and state: one transaction
        for i, message in enumerate(messages[1:], start=1):
            assert message["content"].startswith(f"msg {i} ")  # nothing half-written
        assert record["transcript"] == messages
        assert pairing_problems(messages) == []
        if isinstance(store, SessionStore):
            assert store.db.connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        store.close()
    assert acked > 3
