"""The session lease between real processes, and re-entrance inside one process, on both
backends (a flock on SQLite, an advisory lock on PostgreSQL)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.core.errors import SessionLocked
from tests.support.children import read_line
from tests.support.stores import Stores, wait_until

pytestmark = pytest.mark.slow  # every test here starts a Python process

REPO = Path(__file__).resolve().parents[2]


def holder_text(stores: Stores, pid: int) -> str:
    """How a refusal names the holder: PostgreSQL always says the host (shared by machines)."""
    return f"pid {pid} on {socket.gethostname()}" if stores.is_pg else f"pid {pid}"


@pytest.fixture
def holder(
    stores: Stores, memory_dir: Path
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    store = stores.open(memory_dir)
    sid = store.create_session()
    store.close()
    with subprocess.Popen(
        [sys.executable, "-m", "tests.support.programs.lease_holder", str(memory_dir), sid],
        cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env={**os.environ, **stores.env},
    ) as proc:
        assert proc.stdout is not None
        assert read_line(proc.stdout).strip() == "held"
        try:
            yield proc, sid
        finally:
            proc.kill()


def test_second_process_fails_at_once_naming_the_holder(
    stores: Stores, memory_dir: Path, holder: tuple[subprocess.Popen[str], str]
) -> None:
    proc, sid = holder
    store = stores.open(memory_dir)
    with pytest.raises(SessionLocked) as caught:
        store.update(sid, title="mine")
    assert str(caught.value) == (
        f"Session '{sid}' is in use by another process ({holder_text(stores, proc.pid)})."
    )
    assert store.is_running_elsewhere(sid)
    for mutate in (lambda: store.update(sid, archived=True), lambda: store.delete(sid),
                   lambda: store.checkpoint(sid, [])):
        with pytest.raises(SessionLocked):
            mutate()
    assert store.load_session(sid)["id"] == sid  # reading needs no lease


def test_lease_is_released_when_the_holder_is_killed(
    stores: Stores, memory_dir: Path, holder: tuple[subprocess.Popen[str], str]
) -> None:
    proc, sid = holder
    proc.kill()
    proc.wait(timeout=30)
    store = stores.open(memory_dir)
    if stores.is_pg:  # the server notices the dead connection at once, but asynchronously
        wait_until(lambda: not store.is_running_elsewhere(sid), timeout=10)
    assert not store.is_running_elsewhere(sid)
    store.update(sid, title="free again")
    assert store.info(sid).title == "free again"


def test_lease_is_reentrant_within_a_process(stores: Stores, memory_dir: Path) -> None:
    first, second = stores.open(memory_dir), stores.open(memory_dir)
    sid = first.create_session()
    with first.lease(sid), first.lease(sid), second.lease(sid):
        second.update(sid, title="nested")
        first.update(sid, archived=True)
        assert first.is_leased_here(sid) and second.is_leased_here(sid)
    assert not first.is_leased_here(sid)
    assert not first.is_running_elsewhere(sid)
    # released: another process can take it now
    code = (
        "import os, sys; from actors.store import open_store; "
        f"open_store({str(memory_dir)!r}, os.environ['AGENT_HARNESS_STORE'])"
        f".update({sid!r}, archived=False)"
    )
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True,
                   env={**os.environ, **stores.env})
    assert not first.info(sid).archived
