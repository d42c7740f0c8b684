"""The session lease between real processes, and re-entrance inside one process."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.errors import SessionLocked
from actors.store import SessionStore

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def holder(memory_dir: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    store = SessionStore(memory_dir)
    sid = store.create_session()
    store.close()
    with subprocess.Popen(
        [sys.executable, "-m", "tests.programs.lease_holder", str(memory_dir), sid],
        cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    ) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "held"
        try:
            yield proc, sid
        finally:
            proc.kill()


def test_second_process_fails_at_once_naming_the_holder(
    memory_dir: Path, holder: tuple[subprocess.Popen[str], str]
) -> None:
    proc, sid = holder
    store = SessionStore(memory_dir)
    with pytest.raises(SessionLocked) as caught:
        store.rename(sid, "mine")
    assert str(caught.value) == f"Session '{sid}' is in use by another process (pid {proc.pid})."
    assert store.is_running_elsewhere(sid)
    for mutate in (lambda: store.archive(sid), lambda: store.delete(sid),
                   lambda: store.save_messages(sid, [])):
        with pytest.raises(SessionLocked):
            mutate()
    assert store.load_session(sid)["id"] == sid  # reading needs no lease


def test_lease_is_released_when_the_holder_is_killed(
    memory_dir: Path, holder: tuple[subprocess.Popen[str], str]
) -> None:
    proc, sid = holder
    proc.kill()
    proc.wait()
    store = SessionStore(memory_dir)
    assert not store.is_running_elsewhere(sid)
    store.rename(sid, "free again")
    assert store.info(sid).title == "free again"


def test_lease_is_reentrant_within_a_process(memory_dir: Path) -> None:
    first, second = SessionStore(memory_dir), SessionStore(memory_dir)
    sid = first.create_session()
    with first.lease(sid), first.lease(sid), second.lease(sid):
        second.rename(sid, "nested")
        first.archive(sid)
    assert not first.is_running_elsewhere(sid)
    # released: another process can take it now
    code = (
        "import sys; from actors.store import SessionStore; "
        f"SessionStore({str(memory_dir)!r}).unarchive({sid!r})"
    )
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)
    assert not first.info(sid).archived
