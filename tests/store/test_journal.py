"""The checkpoint journal (actors/store/_journal.py, SQLite): an append is one row, its
tables follow; every reader and writer sees it at once, whichever store instance or process
applies it, exactly once and in order, and a kill -9 between the two commits loses nothing."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from actors.core.messages import pairing_problems
from actors.store import SessionStore
from tests.support.children import read_line

REPO = Path(__file__).resolve().parents[2]
SYSTEM = {"role": "system", "content": "sys"}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def journal_rows(store: SessionStore) -> int:
    """Rows in the journal, read from the connection itself (no settling)."""
    with store.db.lock:
        return int(store._conn.execute("SELECT count(*) FROM journal").fetchone()[0])


def test_an_append_is_one_row_that_every_reader_sees_at_once(memory_dir: Path) -> None:
    writer = SessionStore(memory_dir)
    sid = writer.create_session(messages=[SYSTEM])
    with writer.lease(sid):
        assert writer.append(sid, [user("one"), assistant("two")], at=1, state={"n": 3}) == 3
    assert writer.journaled == 1 and journal_rows(writer) == 1
    with writer.db.lock:  # the tables do not hold it yet
        (held,) = writer._conn.execute("SELECT context_len FROM sessions").fetchone()
    assert held == 1
    reader = SessionStore(memory_dir)  # another instance: it applies what it finds first
    record = reader.load_session(sid)
    assert [m["content"] for m in record["messages"]] == ["sys", "one", "two"]
    assert record["state"] == {"n": 3}
    assert journal_rows(writer) == 0
    assert writer.apply_journal()  # its own entry is gone: nothing applied twice
    assert [m["content"] for m in writer.load_session(sid)["transcript"]] == [
        "sys", "one", "two"]
    with writer.lease(sid):  # and the next append follows on
        writer.append(sid, [user("three")], at=3)
    assert writer.info(sid).transcript_messages == 4 and journal_rows(writer) == 0


def test_a_reused_row_number_is_not_taken_for_an_entry_applied_before(
    memory_dir: Path,
) -> None:
    # The writer's entry 1 is applied by another instance; the journal, empty again, gives
    # its next entry the same row number. The writer tells the two apart by their text.
    writer = SessionStore(memory_dir)
    sid = writer.create_session(messages=[SYSTEM])
    with writer.lease(sid):
        writer.append(sid, [user("a")], at=1)
        SessionStore(memory_dir).info(sid)  # applies it
        writer.append(sid, [user("b")], at=2)
    with writer.db.lock:
        assert [jid for (jid,) in writer._conn.execute("SELECT jid FROM journal")] == [1]
    assert writer.journaled == 2
    transcript = writer.load_session(sid)["transcript"]
    assert [m["content"] for m in transcript] == ["sys", "a", "b"]


def test_entries_are_applied_in_order_across_sessions_and_instances(
    memory_dir: Path,
) -> None:
    writer = SessionStore(memory_dir)
    ids = [writer.create_session(messages=[SYSTEM]) for _ in range(3)]
    lengths = dict.fromkeys(ids, 1)
    rng = random.Random(5)
    for step in range(60):
        sid = rng.choice(ids)
        with writer.lease(sid):
            writer.append(sid, [user(f"{sid} {step}")], at=lengths[sid])
        lengths[sid] += 1
        if step % 7 == 3:  # now and then another instance reads (and so applies) first
            SessionStore(memory_dir).list_sessions()
    reader = SessionStore(memory_dir)
    for sid in ids:
        contents = [m["content"] for m in reader.load_context(sid)][1:]
        assert len(contents) == lengths[sid] - 1
        assert [int(c.split()[1]) for c in contents] == sorted(int(c.split()[1])
                                                                for c in contents)
    assert journal_rows(reader) == 0


@pytest.mark.slow
@pytest.mark.parametrize("every", [0, 3])
def test_a_kill_between_the_journal_and_its_tables_loses_nothing(
    memory_dir: Path, every: int
) -> None:
    # The writer is killed with entries still in the journal (every one of them, or those
    # since it last applied): the next store to open applies them, in order.
    sid = "journaltest"
    rng = random.Random(every)
    for _ in range(4):
        with subprocess.Popen(
            [sys.executable, "-m", "tests.support.programs.journal_writer", str(memory_dir), sid,
             str(every)], cwd=REPO, stdout=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        ) as proc:
            assert proc.stdout is not None
            acked = int(read_line(proc.stdout).split()[1])
            deadline = time.monotonic() + rng.uniform(0.05, 0.3)
            while time.monotonic() < deadline:
                acked = int(read_line(proc.stdout).split()[1])
            proc.send_signal(signal.SIGKILL)
            for line in proc.stdout:  # acks printed before the kill count too
                acked = int(line.split()[1])
        store = SessionStore(memory_dir)
        if every == 0:
            assert journal_rows(store) > 0  # what the killed writer left
        record = store.load_session(sid)
        messages = record["messages"]
        assert len(messages) >= acked
        assert record["state"]["n"] == len(messages)  # the state came with its messages
        for i, message in enumerate(messages[1:], start=1):
            assert message["content"].startswith(f"msg {i} ")  # in order, each once
        assert record["transcript"] == messages and pairing_problems(messages) == []
        assert journal_rows(store) == 0
        store.close()


def test_the_doctor_reports_and_removes_an_entry_that_cannot_be_applied(
    memory_dir: Path,
) -> None:
    from actors.store.sqlite import doctor

    store = SessionStore(memory_dir)
    sid = store.create_session(messages=[SYSTEM])
    with store.db.lock:  # a row that is no entry (damage), as a killed writer might not leave
        store._conn.execute("INSERT INTO journal (session_rid, entry) VALUES (1, 'garbage')")
    assert store.load_session(sid)["messages"] == [SYSTEM]  # reads go on, as applied
    report = doctor.examine(store)
    assert report.stuck == [1]
    assert any("entry 1 cannot be applied" in f.problem for f in report.serious)
    repairs = doctor.repair_in_place(store, report)
    assert any("Removed 1 checkpoint journal entries" in line for line in repairs.done)
    assert journal_rows(store) == 0 and doctor.examine(store).serious == []
    with store.lease(sid):  # and writes go on
        store.append(sid, [user("after the repair")], at=1)
    assert [m["content"] for m in SessionStore(memory_dir).load_context(sid)] == [
        "sys", "after the repair"]


def test_a_salvage_keeps_the_checkpoints_still_in_the_journal(
    memory_dir: Path, tmp_path: Path
) -> None:
    # A writer killed before it applied its entries, then a damaged file: the salvage
    # (--doctor --repair) reads the journal's rows too, not only the tables.
    from actors.store.sqlite._salvage import salvage

    store = SessionStore(memory_dir)
    sid = store.create_session(messages=[SYSTEM, user("first")])
    with store.lease(sid):
        store.append(sid, [assistant("second")], at=2, state={"n": 3})
        store.append(sid, [user("third"), assistant("fourth")], at=3, state={"n": 5})
    assert journal_rows(store) == 2  # committed, not applied: what a kill leaves
    saved = salvage(store.db_path, tmp_path / "salvaged")
    [session] = saved.sessions
    assert session.id == sid and session.whole and session.messages == 5
    with SessionStore(tmp_path / "salvaged") as copy:
        record = copy.load_session(sid)
    assert [m["content"] for m in record["messages"]] == [
        "sys", "first", "second", "third", "fourth"]
    assert record["transcript"] == record["messages"] and record["state"] == {"n": 5}
