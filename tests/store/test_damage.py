"""Damage stays local: a damaged row affects only its session, which ``--doctor`` names;
every other session reads and writes normally (a real SQLite file, damaged as a bad write
or a hand edit leaves it: text that is not UTF-8, JSON that is not, values of the wrong
type, a context row pointing at a message that is gone, a message of the context's tail
missing)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from actors.core.errors import CorruptSession
from actors.store import SessionStore
from actors.testing.scripted_server import Reply, ScriptedServer
from tests.support.clitools import harness

SYSTEM = {"role": "system", "content": "s"}


@dataclass
class Damaged:
    memory_dir: Path
    healthy: str
    text: str  # title not UTF-8, a transcript row and the state not JSON
    types: str  # a blob title, a count that is text
    dangling: str  # a context row pointing at no message
    gone: str  # a message of the context's tail gone from the transcript


def _session(store: SessionStore, words: str) -> str:
    return store.create_session(messages=[SYSTEM, {"role": "user", "content": words}],
                                project_root=str(store.memory_dir.parent / "project"))


@pytest.fixture
def damaged(memory_dir: Path) -> Iterator[Damaged]:
    store = SessionStore(memory_dir)
    healthy = _session(store, "the healthy platypus")
    text, types, dangling, gone = (_session(store, f"{kind} platypus")
                                   for kind in ("text", "types", "dangling", "gone"))
    with store.lease(dangling):  # its context written as rows of its own
        store.replace_context(dangling, store.load_context(dangling))
    store.close()
    conn = sqlite3.connect(memory_dir / "sessions.sqlite3")

    def rid(sid: str) -> int:
        return int(conn.execute("SELECT rid FROM sessions WHERE id = ?", (sid,)).fetchone()[0])

    conn.execute("UPDATE sessions SET title = CAST(X'FF80' AS TEXT), state = '{oops'"
                 " WHERE rid = ?", (rid(text),))
    conn.execute("UPDATE transcript SET body = 'not json' WHERE session_rid = ? AND seq = 1",
                 (rid(text),))
    conn.execute("UPDATE sessions SET title = X'0102', user_messages = 'many' WHERE rid = ?",
                 (rid(types),))
    assert conn.execute("UPDATE context SET mid = 999999 WHERE session_rid = ? AND pos = 1",
                        (rid(dangling),)).rowcount == 1
    conn.execute("DELETE FROM transcript WHERE session_rid = ? AND seq = 0", (rid(gone),))
    conn.commit()
    conn.close()
    yield Damaged(memory_dir, healthy, text, types, dangling, gone)


def test_damaged_sessions_fail_alone_and_the_others_read_and_write(damaged: Damaged) -> None:
    store = SessionStore(damaged.memory_dir)
    listed = store.list_sessions()
    assert {s["id"] for s in listed} == {damaged.healthy, damaged.text, damaged.types,
                                         damaged.dangling, damaged.gone}
    assert all(isinstance(s["title"], str) and isinstance(s["user_messages"], int)
               for s in listed)
    assert store.resolve_id(damaged.healthy[:6]) == damaged.healthy
    for sid, read in ((damaged.text, store.info), (damaged.text, store.load_session),
                      (damaged.dangling, store.load_session), (damaged.gone, store.load_session),
                      (damaged.gone, store.recover)):
        with pytest.raises(CorruptSession, match=f"Session '{sid}' is damaged"):
            read(sid)
    # the healthy one: read, resumed, written, forked; a new session beside them
    assert store.info(damaged.healthy).title == "the healthy platypus"
    context = store.recover(damaged.healthy)
    with store.lease(damaged.healthy):
        store.append(damaged.healthy, [{"role": "assistant", "content": "echidna"}],
                     at=len(context))
    fork = store.fork(damaged.healthy)
    fresh = _session(store, "a new echidna")
    assert [s["id"] for s in store.search_sessions("echidna")] == [fresh, fork,
                                                                     damaged.healthy]
    assert store.load_session(fork)["messages"][-1]["content"] == "echidna"
    assert store.remove_abandoned() == []
    store.close()


@pytest.mark.slow
def test_the_commands_show_the_others_and_the_doctor_names_the_damaged(
    damaged: Damaged,
) -> None:
    listed = harness("--list-sessions", "--all", "--json", memory_dir=damaged.memory_dir)
    assert listed.returncode == 0, listed.stderr
    assert len(json.loads(listed.stdout)) == 5
    found = harness("--search", "platypus", "--all", memory_dir=damaged.memory_dir)
    assert found.returncode == 0 and damaged.healthy in found.stdout
    info = harness("--info", damaged.text, memory_dir=damaged.memory_dir)
    assert info.returncode == 1 and "Traceback" not in info.stderr
    assert info.stderr.strip().splitlines() == [info.stderr.strip()]
    assert f"Session '{damaged.text}' is damaged" in info.stderr
    doctor = harness("--doctor", memory_dir=damaged.memory_dir)
    assert doctor.returncode == 1, doctor.stdout
    named = {line.split(":")[0].strip() for line in doctor.stdout.splitlines()
             if line.startswith("  ")}
    assert {damaged.text, damaged.types, damaged.dangling, damaged.gone} <= named
    assert damaged.healthy not in named
    project = damaged.memory_dir.parent / "project"  # the sessions' project
    project.mkdir()
    with ScriptedServer([Reply("Still here."), Reply("A fresh start.")]) as server:
        resumed = harness("--resume", damaged.healthy, "-p", "go on", "--base-url",
                          server.base_url, memory_dir=damaged.memory_dir, cwd=project)
        new = harness("-p", "start afresh", "--base-url", server.base_url,
                      memory_dir=damaged.memory_dir, cwd=project)
    assert resumed.returncode == 0, resumed.stderr
    assert new.returncode == 0, new.stderr
