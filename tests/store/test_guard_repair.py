"""``--doctor --repair`` never hides a healthy store and saves every readable session.

Real database files damaged the ways disks and people damage them (a page overwritten, a
file cut in half, index entries that disagree with their table), real processes holding the
store (a live harness, a process holding SQLite's lock), and the real ``harness`` command.
"""

from __future__ import annotations

import contextlib
import selectors
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.store import SessionStore
from actors.testing.scripted_server import tool_pairing_errors
from tests.support.clitools import REPO, harness
from tests.support.stores import Stores

pytestmark = pytest.mark.slow
CHILD_READY_S = 20
PAGE = 4096


@contextlib.contextmanager
def child(code: str) -> Iterator[subprocess.Popen[str]]:
    """A Python child running ``code``, which prints ``ready`` and then waits for stdin to
    close; ended (stdin closed, then killed if need be) when the block exits."""
    process = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, cwd=REPO,
    )
    try:
        assert process.stdout is not None
        with selectors.DefaultSelector() as waiting:
            waiting.register(process.stdout, selectors.EVENT_READ)
            ready = waiting.select(CHILD_READY_S) and process.stdout.readline() == "ready\n"
        assert ready, process.stderr.read() if process.poll() is not None else "no ready"
        yield process
    finally:
        with contextlib.suppress(OSError):
            assert process.stdin is not None
            process.stdin.close()
        try:
            process.wait(timeout=CHILD_READY_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=CHILD_READY_S)
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()


def live_store(memory_dir: Path, session_id: str) -> str:
    """Child code: a harness's store, open, holding ``session_id``'s lease."""
    return (
        "import sys\nfrom actors.store import SessionStore\n"
        f"s = SessionStore({str(memory_dir)!r})\n"
        f"with s.lease({session_id!r}):\n"
        "    print('ready', flush=True)\n    sys.stdin.read()\n"
    )


def sessions_with_pages(memory_dir: Path, count: int = 30, messages: int = 6,
                        size: int = 600) -> dict[str, list[dict[str, Any]]]:
    store = SessionStore(memory_dir)
    originals = {}
    for n in range(count):
        sid = store.create_session(messages=[{"role": "system", "content": "s"}] + [
            {"role": "user", "content": f"session{n} message{i} " + "z" * size}
            for i in range(messages)])
        originals[sid] = store.load_session(sid)["messages"]
    with store.db.lock:
        store.db.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    return originals


def root_page(memory_dir: Path, name: str) -> int:
    with contextlib.closing(sqlite3.connect(memory_dir / "sessions.sqlite3")) as raw:
        (page,) = raw.execute("SELECT rootpage FROM sqlite_schema WHERE name = ?",
                              (name,)).fetchone()
    return int(page)


def overwrite_page(memory_dir: Path, page: int) -> None:
    with open(memory_dir / "sessions.sqlite3", "r+b") as f:
        f.seek((page - 1) * PAGE)
        f.write(b"\xa5" * PAGE)


def names(memory_dir: Path) -> list[str]:
    return sorted(p.name for p in memory_dir.iterdir())


def set_aside_files(memory_dir: Path) -> list[str]:
    return [n for n in names(memory_dir) if ".damaged-" in n]


def integrity(memory_dir: Path) -> list[str]:
    with contextlib.closing(sqlite3.connect(memory_dir / "sessions.sqlite3")) as raw:
        return [r[0] for r in raw.execute("PRAGMA integrity_check")]


def test_a_busy_store_is_reported_and_never_moved(memory_dir: Path) -> None:
    originals = sessions_with_pages(memory_dir, count=2)
    holder = (
        "import sqlite3, sys\n"
        f"c = sqlite3.connect({str(memory_dir / 'sessions.sqlite3')!r}, isolation_level=None)\n"
        "c.execute('PRAGMA locking_mode = EXCLUSIVE'); c.execute('BEGIN EXCLUSIVE')\n"
        "c.execute('SELECT count(*) FROM sessions').fetchall()\n"
        "print('ready', flush=True); sys.stdin.read()\n"
    )
    with child(holder):
        before = names(memory_dir)
        result = harness("--doctor", "--repair", memory_dir=memory_dir)
        assert result.returncode == 1 and "Traceback" not in result.stderr
        assert "busy" in result.stdout and "Nothing was changed" in result.stdout
        assert names(memory_dir) == before
    store = SessionStore(memory_dir)
    assert {s["id"] for s in store.list_sessions()} == set(originals)


def test_a_damaged_store_in_use_by_a_live_harness_is_not_replaced(memory_dir: Path) -> None:
    originals = sessions_with_pages(memory_dir)
    overwrite_page(memory_dir, root_page(memory_dir, "sqlite_autoindex_transcript_1"))
    sid = next(iter(originals))
    with child(live_store(memory_dir, sid)):
        refused = harness("--doctor", "--repair", memory_dir=memory_dir)
        assert refused.returncode == 1 and "Traceback" not in refused.stderr
        assert "in use by another process" in refused.stdout
        assert "Nothing to repair" not in refused.stdout
        assert set_aside_files(memory_dir) == []
    repaired = harness("--doctor", "--repair", memory_dir=memory_dir)
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert f"Saved {len(originals)} sessions" in repaired.stdout
    assert f"{len(originals)} whole" in repaired.stdout
    assert integrity(memory_dir) == ["ok"]
    store = SessionStore(memory_dir)
    for session_id, messages in originals.items():
        assert store.load_session(session_id)["messages"] == messages
    assert [r["id"] for r in store.search_sessions("session7 message3")] == [
        list(originals)[7]]
    assert set_aside_files(memory_dir)  # the damaged file is kept beside


def test_an_older_harness_holding_only_a_lease_also_stops_the_swap(memory_dir: Path) -> None:
    originals = sessions_with_pages(memory_dir, count=3)
    overwrite_page(memory_dir, root_page(memory_dir, "sessions_listed"))
    sid = next(iter(originals))
    lock = memory_dir / "sessions" / f"{sid}.lock"
    older = (  # the lease as an older harness takes it: no store users lock
        "import fcntl, json, os, sys\n"
        f"fd = os.open({str(lock)!r}, os.O_RDWR | os.O_CREAT, 0o600)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX); os.ftruncate(fd, 0)\n"
        "os.write(fd, json.dumps({'pid': os.getpid()}).encode())\n"
        "print('ready', flush=True); sys.stdin.read()\n"
    )
    with child(older) as process:
        refused = harness("--doctor", "--repair", memory_dir=memory_dir)
        assert refused.returncode == 1
        assert f"{sid} (pid {process.pid})" in refused.stdout
        assert set_aside_files(memory_dir) == []
    assert harness("--doctor", "--repair", memory_dir=memory_dir).returncode == 0


def test_a_damaged_index_page_is_never_nothing_to_repair(memory_dir: Path) -> None:
    originals = sessions_with_pages(memory_dir, count=10)
    overwrite_page(memory_dir, root_page(memory_dir, "sqlite_autoindex_transcript_1"))
    report = harness("--doctor", memory_dir=memory_dir)
    assert report.returncode == 1 and "No problems found" not in report.stdout
    assert "integrity check" in report.stdout
    repaired = harness("--doctor", "--repair", memory_dir=memory_dir)
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert "Nothing to repair" not in repaired.stdout
    assert integrity(memory_dir) == ["ok"]
    store = SessionStore(memory_dir)
    assert all(store.load_session(s)["messages"] == m for s, m in originals.items())
    again = harness("--doctor", memory_dir=memory_dir)
    assert again.returncode == 0 and "No problems found" in again.stdout


def test_index_entries_that_disagree_are_reindexed_beside_a_live_harness(
    memory_dir: Path,
) -> None:
    originals = sessions_with_pages(memory_dir, count=5)
    # Two indexes of the same shape (two columns) swap their trees: every page is sound,
    # every entry is in the wrong index.
    with contextlib.closing(sqlite3.connect(memory_dir / "sessions.sqlite3")) as raw:
        pages = dict(raw.execute(
            "SELECT name, rootpage FROM sqlite_schema WHERE name IN "
            "('sessions_listed', 'sqlite_autoindex_transcript_1')"))
        raw.execute("PRAGMA writable_schema = ON")
        for name, other in (("sessions_listed", "sqlite_autoindex_transcript_1"),
                            ("sqlite_autoindex_transcript_1", "sessions_listed")):
            raw.execute("UPDATE sqlite_schema SET rootpage = ? WHERE name = ?",
                        (pages[other], name))
        raw.commit()
    assert any("missing from index" in line for line in integrity(memory_dir))
    with child(live_store(memory_dir, next(iter(originals)))):
        repaired = harness("--doctor", "--repair", memory_dir=memory_dir)
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert "REINDEX" in repaired.stdout and "Salvaged" not in repaired.stdout
    assert integrity(memory_dir) == ["ok"] and set_aside_files(memory_dir) == []
    store = SessionStore(memory_dir)
    assert all(store.load_session(s)["messages"] == m for s, m in originals.items())


@pytest.mark.parametrize("kept", [0.5, 0.8])
def test_a_truncated_store_yields_every_readable_session(memory_dir: Path, kept: float) -> None:
    originals = sessions_with_pages(memory_dir, count=40, messages=5, size=3000)
    path = memory_dir / "sessions.sqlite3"
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * kept) // PAGE * PAGE])
    before = SessionStore(memory_dir)
    loadable = set()
    for session_id, messages in originals.items():
        with contextlib.suppress(Exception):
            if before.load_session(session_id)["messages"] == messages:
                loadable.add(session_id)
    before.close()
    assert 0 < len(loadable) < len(originals)
    repaired = harness("--doctor", "--repair", memory_dir=memory_dir)
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert integrity(memory_dir) == ["ok"]
    store = SessionStore(memory_dir)
    whole = {s for s, m in originals.items()
             if store.exists(s) and store.load_session(s)["messages"] == m}
    assert loadable <= whole
    for session_id in set(originals) - whole:  # each one listed with what was saved of it
        if not store.exists(session_id):  # its row was cut off (and it was not loadable):
            continue                      # what is left of it is a session of its own
        assert f"  {session_id} " in repaired.stdout
        assert tool_pairing_errors(store.load_session(session_id)["messages"]) == []
    assert f"{len(whole)} whole" in repaired.stdout


def test_an_unreadable_file_is_set_aside_and_a_newer_one_is_left_alone(
    memory_dir: Path,
) -> None:
    memory_dir.mkdir(mode=0o700)
    (memory_dir / "sessions.sqlite3").write_bytes(b"this is not a database" * 300)
    repaired = harness("--doctor", "--repair", memory_dir=memory_dir)
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert "Nothing could be read" in repaired.stdout and len(set_aside_files(memory_dir)) == 1
    assert harness("--list-sessions", memory_dir=memory_dir).returncode == 0

    newer = memory_dir.parent / "newer"
    SessionStore(newer).close()
    with contextlib.closing(sqlite3.connect(newer / "sessions.sqlite3")) as raw:
        raw.execute("PRAGMA user_version = 99")
    before = names(newer)
    refused = harness("--doctor", "--repair", memory_dir=newer)
    assert refused.returncode == 1 and "newer agent-harness" in refused.stdout
    assert "nothing was changed" in refused.stdout and names(newer) == before


def calls(*ids: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": i, "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
        for i in ids]}


def result(call_id: Any, text: str = "ok") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


@pytest.mark.parametrize("context, problem", [
    ([calls(5), result(5)], "is not a string"),
    ([calls("a", "a"), result("a"), result("a", "second")], "used twice"),
    ([calls("a", "b"), result("a"), {"role": "user", "content": "next"}], "has no result"),
])
def test_doctor_checks_the_pairing_of_every_saved_context(
    memory_dir: Path, context: list[dict[str, Any]], problem: str
) -> None:
    store = SessionStore(memory_dir)
    sid = store.create_session(messages=[{"role": "user", "content": "go"}, *context])
    store.close()
    report = harness("--doctor", memory_dir=memory_dir)
    assert report.returncode == 1 and "No problems found" not in report.stdout
    assert f"{sid}: its context cannot be sent to an endpoint" in report.stdout
    assert problem in report.stdout
    repaired = harness("--doctor", "--repair", memory_dir=memory_dir)
    assert repaired.returncode == 0, repaired.stdout
    store = SessionStore(memory_dir)
    [copy] = [s for s in store.list_sessions() if s["parent_id"] == sid]
    messages = store.load_session(copy["id"])["messages"]
    assert tool_pairing_errors(messages) == []
    ids = [c["id"] for m in messages for c in m.get("tool_calls") or []]
    assert all(isinstance(i, str) for i in ids) and len(set(ids)) == len(ids)
    assert [m["content"] for m in messages if m["role"] == "tool"][:1] == ["ok"]


def test_calls_open_at_a_crash_are_a_note_not_a_problem(memory_dir: Path) -> None:
    store = SessionStore(memory_dir)
    store.create_session(messages=[{"role": "user", "content": "go"}, calls("a")],
                         status="active")
    store.close()
    report = harness("--doctor", memory_dir=memory_dir)
    assert report.returncode == 0 and "No problems found" in report.stdout
    assert "running at the crash" in report.stdout


def test_doctor_checks_the_pairing_on_postgresql_too(pg_stores: Stores, memory_dir: Path
                                                      ) -> None:
    store = pg_stores.open(memory_dir)
    bad = store.create_session(messages=[{"role": "user", "content": "go"}, calls(5),
                                         result(5)])
    crashed = store.create_session(messages=[{"role": "user", "content": "go"}, calls("a")],
                                   status="active")
    report = harness("--doctor", memory_dir=memory_dir, env=pg_stores.env)
    assert report.returncode == 1, report.stdout + report.stderr
    assert f"{bad}: its context cannot be sent to an endpoint" in report.stdout
    assert "is not a string" in report.stdout
    assert f"{crashed}: its context" not in report.stdout  # open at a crash: recovered
