"""Faults at the storage boundary: a full disk, a read-only store, damaged files.

The full-disk and read-only tests need a file system of their own. They mount it in a mount
namespace owned by an unprivileged user namespace (``unshare --user --map-root-user
--mount``), so they need no root; the harness runs inside that namespace (``nsenter``) and
the test reaches its files through ``/proc/PID/root``. Where user namespaces are not allowed,
root mounts in the test's own namespace; otherwise the tests are skipped, or fail under
``AGENT_HARNESS_TEST_STRICT=1`` (tests/support/strict.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.core.errors import CorruptSession
from actors.core.messages import pairing_problems
from actors.store import SessionStore
from actors.testing.scripted_server import Reply, ScriptedServer, ToolCall, tool_pairing_errors
from tests.support.clitools import REPO, harness
from tests.support.stores import without_tails
from tests.support.strict import unavailable

NAMESPACE_READY_S = 10


class Mounts:
    """Where a test mounts file systems: a private mount namespace (unprivileged), or, for
    root without user namespaces, the test's own one. Everything mounted is gone at close."""

    def __init__(self) -> None:
        self._holder: subprocess.Popen[bytes] | None = None
        self._mounted: list[Path] = []
        try:
            holder = subprocess.Popen(
                ["unshare", "--user", "--map-root-user", "--mount", "--propagation", "private",
                 "sh", "-c", "echo ready; exec cat"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            )
        except OSError as exc:
            self.why_not = f"no unshare ({exc.strerror})"
            return
        assert holder.stdout is not None
        with selectors.DefaultSelector() as waiting:  # every read from a child has a timeout
            waiting.register(holder.stdout, selectors.EVENT_READ)
            ready = waiting.select(NAMESPACE_READY_S) and holder.stdout.readline() == b"ready\n"
        if ready:
            self._holder = holder
            self.why_not = ""
        else:
            self.why_not = f"unshare failed ({self._stop(holder)})"

    @staticmethod
    def _stop(holder: subprocess.Popen[bytes]) -> str:
        with contextlib.suppress(OSError):
            holder.kill()
        _, err = holder.communicate(timeout=NAMESPACE_READY_S)
        return err.decode(errors="replace").strip() or f"status {holder.returncode}"

    @property
    def private(self) -> bool:
        """True when the mounts live in a namespace of their own (no root needed)."""
        return self._holder is not None

    @property
    def prefix(self) -> list[str]:
        """The command prefix that runs a program where the mounts are."""
        if self._holder is None:
            return []
        return ["nsenter", "--target", str(self._holder.pid), "--user", "--mount",
                "--preserve-credentials", "--"]

    def outside(self, path: Path) -> Path:
        """How this process reaches ``path`` as the programs inside see it."""
        if self._holder is None:
            return path
        return Path(f"/proc/{self._holder.pid}/root{path}")

    def mount(self, *args: str) -> None:
        """``mount ARGS`` where the mounts are; the test is skipped (strict: failed) when the
        mount is not allowed here."""
        if self._holder is None and os.geteuid() != 0:
            unavailable(f"cannot mount here: {self.why_not}, and not root")
        made = subprocess.run([*self.prefix, "mount", *args], capture_output=True, text=True,
                              timeout=30)
        if made.returncode != 0:
            where = "in a user namespace" if self.private else f"as root ({self.why_not})"
            unavailable(f"cannot mount {where}: {made.stderr.strip()}")
        self._mounted.append(Path(args[-1]))

    def close(self) -> None:
        holder = self._holder
        if holder is not None:  # the namespace, and its mounts, end with the holder
            for pipe in (holder.stdin, holder.stdout, holder.stderr):
                if pipe is not None:
                    pipe.close()
            holder.wait(timeout=NAMESPACE_READY_S)
        else:
            for point in reversed(self._mounted):
                subprocess.run(["umount", "-l", str(point)], check=False, timeout=30)


@pytest.fixture
def mounts() -> Iterator[Mounts]:
    opened = Mounts()
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def tiny_fs(tmp_path: Path, mounts: Mounts) -> Path:
    """A 2 MB tmpfs (as the programs run in ``mounts`` see it)."""
    mount_point = tmp_path / "tiny"
    mount_point.mkdir()
    mounts.mount("-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount_point))
    return mount_point


def harness_in(mounts: Mounts, *args: str, memory_dir: Path, cwd: Path | None = None,
               timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """:func:`tests.support.clitools.harness`, run where the mounts are."""
    if not mounts.prefix:
        return harness(*args, memory_dir=memory_dir, cwd=cwd, timeout=timeout)
    env = {**os.environ, "AGENT_HARNESS_MEMORY_DIR": str(memory_dir), "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [*mounts.prefix, sys.executable, "-m", "repl", *args], cwd=cwd or REPO, env=env,
        capture_output=True, text=True, timeout=timeout,
    )


def fill(directory: Path) -> Path:
    """Fill the file system of ``directory`` completely; return the filler file."""
    filler = directory / "filler"
    with contextlib.suppress(OSError), open(filler, "wb") as f:
        while True:
            f.write(b"\0" * 65536)
            f.flush()
    with contextlib.suppress(OSError), open(filler, "ab") as f:  # the last few bytes
        for _ in range(65536):
            f.write(b"\0")
            f.flush()
    return filler


@pytest.mark.slow
def test_full_disk_stops_the_turn_and_loses_nothing(
    tiny_fs: Path, mounts: Mounts, tmp_path: Path
) -> None:
    memory_dir = tiny_fs / "memory"
    project = tmp_path / "project"
    project.mkdir()
    marker = project / "tool-ran"
    with ScriptedServer([Reply("Hello.")]) as server:
        first = harness_in(mounts, "-p", "hello", "--base-url", server.base_url,
                           memory_dir=memory_dir, cwd=project)
    assert first.returncode == 0, first.stderr
    sid = first.stderr.split()[1]

    def fill_then_call_a_tool(body: dict[str, Any]) -> Any:
        fill(mounts.outside(tiny_fs))
        return Reply(tool_calls=[ToolCall("run_bash", {"command": f"touch {marker}"})])

    with ScriptedServer(fill_then_call_a_tool) as server:
        failed = harness_in(mounts, "--resume", sid, "-p", "now do something", "--base-url",
                            server.base_url, "--mode", "dangerouslySkipPermissions",
                            memory_dir=memory_dir, cwd=project)
        requests = len(server.requests)
    assert failed.returncode == 1
    assert "No space left on device" in failed.stderr and "Traceback" not in failed.stderr
    assert "last saved checkpoint is intact" in failed.stderr
    assert requests == 1 and not marker.exists()  # no tool ran, no further request was sent

    (mounts.outside(tiny_fs) / "filler").unlink()
    with ScriptedServer([Reply("Back again.")]) as server:
        resumed = harness_in(mounts, "--resume", sid, "-p", "space is back", "--base-url",
                             server.base_url, memory_dir=memory_dir, cwd=project)
        assert resumed.returncode == 0, resumed.stderr
        sent = server.requests[0]["messages"]
    assert [m["content"] for m in sent if m["role"] == "user"] == [
        "hello", "now do something", "space is back"]
    assert tool_pairing_errors(sent) == []
    assert not marker.exists()


@pytest.mark.slow
def test_read_only_store_is_reported_with_its_cause(
    memory_dir: Path, mounts: Mounts, tmp_path: Path
) -> None:
    store = SessionStore(memory_dir)
    sid = store.create_session(messages=[{"role": "system", "content": "s"}])
    store.close()
    read_only = tmp_path / "ro"
    read_only.mkdir()
    mounts.mount("--bind", str(memory_dir), str(read_only))
    mounts.mount("-o", "remount,ro,bind", str(read_only))
    result = harness_in(mounts, "--rename", sid, "new title", memory_dir=read_only)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "read-only" in result.stderr.lower()
    assert SessionStore(memory_dir).info(sid).title == ""


@pytest.mark.slow
def test_a_read_only_store_is_read_and_says_so_and_refuses_writes_in_one_line(
    memory_dir: Path, mounts: Mounts, tmp_path: Path
) -> None:
    store = SessionStore(memory_dir)
    one = store.create_session(messages=[{"role": "system", "content": "s"}], title="Alpha")
    store.checkpoint(one, [{"role": "system", "content": "s"},
                           {"role": "user", "content": "find the platypus"}])
    two = store.create_session(messages=[{"role": "system", "content": "s"},
                                         {"role": "user", "content": "second one"}])
    store.catch_up_index()
    read_only = tmp_path / "ro"
    read_only.mkdir()
    mounts.mount("--bind", str(memory_dir), str(read_only))
    mounts.mount("-o", "remount,ro,bind", str(read_only))
    project = tmp_path / "project"
    project.mkdir()

    def reads(*, log_left: bool) -> None:
        """Every reading command works, and says the store is read-only."""
        for args, shows in ((("--list-sessions", "--all"), [one, two]),
                            (("--search", "platypus", "--all"), [one]),
                            (("--info", one), ["Alpha"]), (("--export", two), ["second one"])):
            result = harness_in(mounts, *args, memory_dir=read_only, cwd=project)
            assert result.returncode == 0, (log_left, args, result.stderr)
            assert "read-only" in result.stderr and "Traceback" not in result.stderr
            assert all(text in result.stdout for text in shows), (args, result.stdout)
        assert [s["id"] for s in json.loads(harness_in(
            mounts, "--list-sessions", "--all", "--json", memory_dir=read_only).stdout)] == [
            two, one]

    reads(log_left=True)  # the writer still has the store open: its -wal and -shm are there
    store.close()
    reads(log_left=False)  # closed cleanly: the database file alone
    without_tails(memory_dir / "sessions.sqlite3", 8)  # as an earlier harness left it:
    reads(log_left=False)  # read as it is, the migration it awaits not made
    with ScriptedServer([Reply("never asked")]) as server:
        writes = [("--rename", one, "new title"), ("--delete", two, "--yes"), ("--fork", one),
                  ("--archive", one), ("-p", "hello", "--base-url", server.base_url),
                  ("--resume", one, "-p", "hello", "--base-url", server.base_url)]
        for args in writes:
            result = harness_in(mounts, *args, memory_dir=read_only, cwd=project)
            assert result.returncode == 1, (args, result.stderr)
            said = [line for line in result.stderr.splitlines()
                    if "the session store is read-only" not in line]
            assert len(said) == 1 and "read-only" in said[0], (args, result.stderr)
        assert server.requests == []
    after = SessionStore(memory_dir)
    assert [s["id"] for s in after.list_sessions()] == [two, one]
    assert after.info(one).title == "Alpha"
    after.close()


@pytest.mark.slow
def test_garbage_database_file_gives_one_clear_line(memory_dir: Path) -> None:
    memory_dir.mkdir(mode=0o700)
    (memory_dir / "sessions.sqlite3").write_bytes(b"this is not a database" * 100)
    result = harness("--list-sessions", memory_dir=memory_dir)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "damaged" in result.stderr and "harness --doctor" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def _session_with_pages(store: SessionStore, text: str, count: int) -> str:
    return store.create_session(messages=[{"role": "system", "content": "s"}] + [
        {"role": "user", "content": f"{text} {i} " + "z" * 3000} for i in range(count)])


def test_truncated_database_keeps_healthy_sessions_and_names_damaged_ones(
    memory_dir: Path, tmp_path: Path
) -> None:
    store = SessionStore(memory_dir)
    healthy = _session_with_pages(store, "healthy", 3)
    originals = {healthy: store.load_session(healthy)["messages"]}
    for n in range(4):
        sid = _session_with_pages(store, f"bulk{n}", 25)
        originals[sid] = store.load_session(sid)["messages"]
    store.db.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    pristine = (memory_dir / "sessions.sqlite3").read_bytes()
    damaged_seen = 0
    for lost_pages in (20, 60, 120, 200):
        path = memory_dir / "sessions.sqlite3"
        path.write_bytes(pristine[: len(pristine) - lost_pages * 4096])
        fresh = SessionStore(memory_dir)
        assert any("truncated" in w for w in fresh.import_warnings)
        assert fresh.load_session(healthy)["messages"] == originals[healthy]
        for sid, messages in originals.items():
            try:
                loaded = fresh.load_session(sid)["messages"]
            except CorruptSession as exc:
                assert f"Session '{sid}' is damaged" in str(exc)
                damaged_seen += 1
            else:
                assert loaded == messages  # whole, or not at all: never half-loaded
        fresh.close()
    assert damaged_seen > 0
    assert list(memory_dir.glob("sessions.sqlite3.truncated-*"))  # the damaged file is kept


@pytest.mark.slow
def test_doctor_reports_and_repairs_into_a_new_session(memory_dir: Path) -> None:
    store = SessionStore(memory_dir)
    good = store.create_session(messages=[{"role": "user", "content": "fine"}])
    bad = store.create_session(messages=[
        {"role": "system", "content": "s"}, {"role": "user", "content": "keep me"},
        {"role": "assistant", "content": "answer one"}, {"role": "user", "content": "lost"},
    ])
    store.close()
    with sqlite3.connect(memory_dir / "sessions.sqlite3") as raw:
        raw.execute("UPDATE transcript SET body = '{not json' WHERE body LIKE '%lost%'")
        raw.execute("DELETE FROM message_text WHERE rowid IN (SELECT mid FROM transcript "
                    "WHERE body LIKE '%answer one%')")
    report = harness("--doctor", memory_dir=memory_dir)
    assert report.returncode == 1
    assert f"{bad}: " in report.stdout and "not valid JSON" in report.stdout
    assert "search index" in report.stdout
    assert good not in report.stdout.split("Problems")[-1]
    repaired = harness("--doctor", "--repair", memory_dir=memory_dir)
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    fresh = SessionStore(memory_dir)
    copies = [s for s in fresh.list_sessions() if s["parent_id"] == bad]
    assert len(copies) == 1
    copy = fresh.load_session(copies[0]["id"])
    assert [m["content"] for m in copy["messages"]] == ["s", "keep me", "answer one"]
    assert pairing_problems(copy["messages"]) == []
    assert [r["id"] for r in fresh.search_sessions("answer one")] in (
        [copies[0]["id"]], [copies[0]["id"], bad], [bad, copies[0]["id"]])
    assert bad in {r["id"] for r in fresh.search_sessions("answer one")}  # index rebuilt
    with pytest.raises(CorruptSession):  # the original is never edited in place
        fresh.load_session(bad)
    again = harness("--doctor", memory_dir=memory_dir)
    assert "not valid JSON" in again.stdout  # still reported: the copy is the repair


@pytest.mark.slow
def test_results_that_cannot_be_saved_are_never_sent(
    tiny_fs: Path, mounts: Mounts, tmp_path: Path
) -> None:
    memory_dir = tiny_fs / "memory"
    project = tmp_path / "project"
    project.mkdir()
    fill_command = f"cat /dev/zero > {tiny_fs}/filler 2>/dev/null; echo filled"
    script = [Reply(tool_calls=[ToolCall("run_bash", {"command": fill_command})]),
              Reply("This request must never be made.")]
    with ScriptedServer(script) as server:
        result = harness_in(mounts, "-p", "fill it", "--base-url", server.base_url,
                            "--mode", "dangerouslySkipPermissions", memory_dir=memory_dir,
                            cwd=project)
        requests = len(server.requests)
    assert result.returncode == 1 and "No space left on device" in result.stderr
    assert requests == 1  # durable before visible: the unsaved result went nowhere
    sid = result.stderr.split()[1]
    (mounts.outside(tiny_fs) / "filler").unlink()
    with ScriptedServer([Reply("Resumed.")]) as server:
        resumed = harness_in(mounts, "--resume", sid, "-p", "go on", "--base-url",
                             server.base_url, memory_dir=memory_dir, cwd=project)
        assert resumed.returncode == 0, resumed.stderr
        sent = server.requests[0]["messages"]
    assert tool_pairing_errors(sent) == []
    [answer] = [m["content"] for m in sent if m["role"] == "tool"]
    assert answer.startswith("Execution interrupted; outcome unknown")  # it did start
