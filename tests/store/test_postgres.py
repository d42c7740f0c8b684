"""What only the shared PostgreSQL store does: several harness processes ("machines", each
with its own memory dir) on one database, lost connections, moving sessions between backends.

Skipped without AGENT_HARNESS_TEST_PG (see tests/support/stores.py); CI always sets it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from actors.core.errors import StorageError
from actors.core.messages import INTERRUPTED_NOTICE
from actors.store import Store, export_session, import_paths, open_store
from actors.store._survivors import HAD_ENDED
from actors.store.postgres._schema import SCHEMA_VERSION
from actors.testing.scripted_server import (
    Hang,
    Reply,
    ScriptedServer,
    ToolCall,
    tool_pairing_errors,
)
from tests.support.children import read_line, rest_of
from tests.support.clitools import REPO, harness
from tests.support.runtime import wait_for
from tests.support.stores import Stores, wait_until

SYSTEM = {"role": "system", "content": "sys"}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


class Machine:
    """A harness on its own "machine": its own memory dir and process, the shared store."""

    def __init__(self, stores: Stores, root: Path, name: str) -> None:
        self.stores = stores
        self.memory_dir = root / name / "memory"
        self.project = root / "project"  # the same checkout path on every machine
        self.project.mkdir(parents=True, exist_ok=True)
        self.procs: list[subprocess.Popen[str]] = []

    def env(self) -> dict[str, str]:
        return {**self.stores.env, "OPENAI_API_KEY": "test"}

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``harness ARGS`` to its end."""
        return harness(*args, memory_dir=self.memory_dir, cwd=self.project, env=self.env())

    def start(self, *args: str) -> tuple[subprocess.Popen[str], str]:
        """``harness ARGS`` in the background, once it has printed its session id."""
        env = {**os.environ, "AGENT_HARNESS_MEMORY_DIR": str(self.memory_dir),
               "PYTHONPATH": str(REPO), **self.env()}
        proc = subprocess.Popen(
            [sys.executable, "-m", "repl", *args], cwd=self.project, env=env, text=True,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        self.procs.append(proc)
        assert proc.stderr is not None
        first = read_line(proc.stderr)
        assert first.startswith("Session: "), first + rest_of(proc)
        return proc, first.split()[1]

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.communicate(timeout=30)


@pytest.fixture
def machines(pg_stores: Stores, tmp_path: Path) -> Iterator[tuple[Machine, Machine]]:
    pair = Machine(pg_stores, tmp_path, "first"), Machine(pg_stores, tmp_path, "second")
    try:
        yield pair
    finally:
        for machine in pair:
            machine.stop()


def model(server: ScriptedServer, *extra: str) -> list[str]:
    return ["--base-url", server.base_url, "--llm-timeout", "30", *extra]


def admin(stores: Stores, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Run ``sql`` on the test server on a connection of its own (a DBA's, say)."""
    assert stores.url is not None
    with psycopg.connect(stores.url, autocommit=True) as conn:
        cursor = conn.execute(sql, params)
        return cursor.fetchall() if cursor.description else []


def terminate_backends_of(stores: Stores, pid: int) -> int:
    """Close every server connection of process ``pid`` (as a server restart or a network
    failure would); how many there were."""
    return len(admin(stores, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                     "WHERE application_name = %s", (f"agent-harness[{pid}]",)))


@pytest.mark.slow
def test_second_machine_is_refused_while_the_first_runs(
    machines: tuple[Machine, Machine]
) -> None:
    first, second = machines
    with ScriptedServer([Hang()]) as server:
        proc, sid = first.start("-p", "wait", *model(server))
        server.wait_for_requests(1, timeout=15)
        refused = second.run("--resume", sid, "-p", "me too", *model(server))
        assert refused.returncode == 2
        assert refused.stderr.strip() == (
            f"harness: Session '{sid}' is in use by another process "
            f"(pid {proc.pid} on {socket.gethostname()})."
        )
        renamed = second.run("--rename", sid, "mine")  # any write is refused, reads are fine
        assert renamed.returncode == 2 and "is in use by another process" in renamed.stderr
        assert sid in second.run("--list-sessions").stdout
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 1
    store = first.stores.open(second.memory_dir)
    assert store.info(sid).status == "saved"


@pytest.mark.slow
def test_killed_holder_frees_the_session_for_another_machine(
    machines: tuple[Machine, Machine], tmp_path: Path
) -> None:
    first, second = machines
    pid_file = tmp_path / "pid"
    script = [Reply(tool_calls=[
        ToolCall("run_bash", {"command": f"echo $$ > {pid_file}; exec sleep 30"}),
        ToolCall("write_file", {"path": "later.txt", "content": "x"}),
    ])]
    with ScriptedServer(script) as server:
        proc, sid = first.start("-p", "go", *model(server, "--mode", "dangerouslySkipPermissions"))
        child = int(wait_for(pid_file))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    os.kill(child, signal.SIGKILL)
    store = first.stores.open(second.memory_dir)
    wait_until(lambda: not store.is_running_elsewhere(sid))  # the server saw the socket close
    with ScriptedServer([Reply("Recovered.")]) as server:
        result = second.run("--resume", sid, "-p", "what happened?", *model(server))
        assert result.returncode == 0, result.stderr
        sent = server.requests[0]["messages"]
    assert "not closed cleanly" in result.stderr
    assert tool_pairing_errors(sent) == []
    results = {m["tool_call_id"]: m["content"] for m in sent if m["role"] == "tool"}
    bash_id, write_id = sorted(results)
    # the first line is the exact notice; the second says the guardian had ended the group
    assert results[bash_id] in (INTERRUPTED_NOTICE, f"{INTERRUPTED_NOTICE}\n{HAD_ENDED}")
    assert results[write_id].startswith("Not executed")


@pytest.mark.slow
def test_a_session_written_on_one_machine_resumes_on_another(
    machines: tuple[Machine, Machine]
) -> None:
    first, second = machines
    with ScriptedServer([Reply("Noted: zeppelin.")]) as server:
        written = first.run("-p", "Remember the word zeppelin", *model(server))
        assert written.returncode == 0, written.stderr
    sid = written.stderr.split()[1]
    assert not (second.memory_dir / "sessions.sqlite3").exists()
    found = second.run("--search", "ZEPPELIN")
    assert found.stdout.splitlines()[1].startswith(sid + "  "), found  # under the header
    with ScriptedServer([Reply("You said zeppelin.")]) as server:
        resumed = second.run("--resume", sid, "-p", "Which word?", *model(server))
        assert resumed.returncode == 0, resumed.stderr
        sent = server.requests[0]["messages"]
    assert resumed.stdout == "You said zeppelin.\n"
    assert [m["content"] for m in sent[1:]] == [
        "Remember the word zeppelin", "Noted: zeppelin.", "Which word?"
    ]
    info = json.loads(first.run("--info", sid, "--json").stdout)
    assert info["context_messages"] == 5 and info["status"] == "saved"


@pytest.mark.slow
def test_lost_connections_stop_the_turn_and_keep_every_saved_checkpoint(
    machines: tuple[Machine, Machine], tmp_path: Path
) -> None:
    first, second = machines
    pid_file = tmp_path / "pid"
    script = [Reply(tool_calls=[
        ToolCall("run_bash", {"command": f"echo $$ > {pid_file}; sleep 1; echo done"}),
    ]), Reply("never asked")]
    with ScriptedServer(script) as server:
        # Without workspace snapshots: their own connection would be a third backend, and
        # its loss a warning line of its own (tests/workspace/test_snapshot.py).
        proc, sid = first.start("-p", "go", *model(server, "--mode", "dangerouslySkipPermissions",
                                                   "--no-snapshots"))
        wait_for(pid_file)
        assert terminate_backends_of(first.stores, proc.pid) == 2  # the data and lease ones
        out, err = proc.communicate(timeout=30)
        assert len(server.requests) == 1  # the turn stopped before asking the model again
    assert proc.returncode == 1 and out == "" and "Traceback" not in err
    # Both connections died: the checkpoint finds the data connection dead, or (when the
    # search indexer, idle between writes, met the dead connection first and a new one was
    # made) the lease gone; either way nothing more is saved.
    assert ("Turn failed: Could not save the session: Lost the connection to the PostgreSQL "
            "session store" in err) or ("Turn failed: Could not save the session: Lost the "
                                         "lease of session" in err), err
    assert "the last saved checkpoint is intact" in err
    assert len(err.strip().splitlines()) == 2, err  # the tool line and the failure
    store = first.stores.open(second.memory_dir)
    wait_until(lambda: not store.is_running_elsewhere(sid))
    record = store.load_session(sid)
    assert [m["role"] for m in record["transcript"][1:]] == ["user", "assistant"]
    assert record["status"] == "active"  # nothing could be written after the loss
    assert record["messages"][-1]["content"] == INTERRUPTED_NOTICE  # recovery answers it
    with ScriptedServer([Reply("Back.")]) as server:
        resumed = second.run("--resume", sid, "-p", "again", *model(server))
    assert resumed.returncode == 0 and "not closed cleanly" in resumed.stderr


def test_a_write_after_the_lease_connection_died_is_refused(
    pg_stores: Stores, memory_dir: Path
) -> None:
    store = pg_stores.open(memory_dir)
    sid = store.create_session(messages=[SYSTEM])
    lease = store.lease(sid)
    lease.__enter__()
    store.checkpoint(sid, [SYSTEM, user("acknowledged")])
    keeper_pid = pg_stores.rows(store, "SELECT backend_pid FROM session_leases")[0][0]
    admin(pg_stores, "SELECT pg_terminate_backend(%s)", (keeper_pid,))
    wait_until(lambda: not store.is_running_elsewhere(sid) and not pg_stores.rows(
        store, "SELECT 1 FROM pg_stat_activity WHERE pid = ?", (keeper_pid,)))
    with pytest.raises(StorageError, match=f"Lost the lease of session '{sid}'"):
        store.checkpoint(sid, [SYSTEM, user("acknowledged"), user("written without lock")])
    lease.__exit__(None, None, None)
    other = pg_stores.open(memory_dir)
    assert other.load_session(sid)["messages"] == [SYSTEM, user("acknowledged")]
    other.update(sid, title="taken over")  # the lock is free: another holder may write
    store.checkpoint(sid, [SYSTEM, user("acknowledged"), user("a new lease")])
    assert other.load_session(sid)["messages"][-1] == user("a new lease")


def test_a_dropped_data_connection_is_one_error_then_reconnects(
    pg_stores: Stores, memory_dir: Path
) -> None:
    store = pg_stores.open(memory_dir)
    sid = store.create_session(messages=[SYSTEM])
    with store.lease(sid):
        data_pid = store.db.connection.raw.info.backend_pid  # type: ignore[attr-defined]
        admin(pg_stores, "SELECT pg_terminate_backend(%s)", (data_pid,))
        with pytest.raises(StorageError, match="Lost the connection to the PostgreSQL"):
            store.checkpoint(sid, [SYSTEM, user("lost")])
        store.checkpoint(sid, [SYSTEM, user("saved after reconnecting")])
    assert store.load_session(sid)["messages"][-1] == user("saved after reconnecting")


@pytest.mark.slow
def test_an_unreachable_server_is_one_clear_line(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    url = f"postgresql://someone:secret@127.0.0.1:{port}/team"
    result = harness("--list-sessions", memory_dir=tmp_path / "memory",
                     env={"AGENT_HARNESS_STORE": url})  # a password: never on the command line
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert result.stderr.startswith(
        f"harness: Cannot connect to the PostgreSQL session store "
        f"(postgresql://someone@127.0.0.1:{port}/team): "
    )
    assert "secret" not in result.stderr
    with pytest.raises(StorageError, match="Connection refused"):
        open_store(tmp_path / "memory", url)


def _populate(store: Store) -> list[str]:
    ids = []
    for title, text in (
        ("Cache work", "The Cache key omits the locale"),
        ("École", "Une école de cuisine et le cache"),
        ("", "cache warmed at startup; the locale is fr_FR"),
        ("Parser", "rewrite the parser in 50% fewer lines"),
    ):
        sid = store.create_session(messages=[SYSTEM, user(text)], title=title)
        ids.append(sid)
    store.update(ids[2], summary="Nothing about languages.")
    return ids


@pytest.mark.parametrize("query", [
    "cache", "CACHE locale", "ocal", "école", "ÉCOLE cache", "languages", "pa", "fr_fr",
    "50", "e", "zzz", "parser rewrite", "cache nothing",
])
def test_search_finds_and_ranks_as_sqlite_does(
    pg_stores: Stores, tmp_path: Path, query: str
) -> None:
    pg = pg_stores.open(tmp_path / "pg")
    lite = open_store(tmp_path / "lite", None)
    try:
        by_title = {}
        for store in (pg, lite):
            for sid in _populate(store):
                by_title.setdefault(store.info(sid).title + store.info(sid).summary, []).append(
                    sid)
        pairs = {pg_id: lite_id for pg_id, lite_id in by_title.values()}
        pg_hits = [(pairs[r["id"]], r["snippet"]) for r in pg.search_sessions(query)]
        lite_hits = [(r["id"], r["snippet"]) for r in lite.search_sessions(query)]
        assert pg_hits == lite_hits
    finally:
        lite.close()


def test_sessions_move_between_sqlite_and_postgresql(pg_stores: Stores, tmp_path: Path) -> None:
    pg = pg_stores.open(tmp_path / "memory")
    sid = pg.create_session(messages=[SYSTEM, user("portable"), {
        "role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "grep", "arguments": "{}"}}]}])
    pg.replace_context(sid, [SYSTEM, user("<summary>")], compaction={
        "before_tokens": 9, "after_tokens": 3, "summary": "compacted"})
    pg.update(sid, state={"todos": [{"text": "t"}]}, summary="sum", title="Moved")
    exported = tmp_path / "exported.json"
    exported.write_text(json.dumps(export_session(pg, sid)))
    lite = open_store(tmp_path / "lite", None)
    [imported] = import_paths(lite, exported)
    assert imported.session_id == sid and not imported.error
    back = tmp_path / "back.json"
    back.write_text(json.dumps(export_session(lite, sid)))
    lite.close()
    again = pg_stores.open_other(tmp_path / "memory")
    import_paths(again, back)
    assert export_session(again, sid) == export_session(pg, sid)
    assert [r["id"] for r in again.search_sessions("compacted moved")] == [sid]


@pytest.mark.slow
def test_doctor_says_what_it_checks_on_postgresql(
    pg_stores: Stores, memory_dir: Path
) -> None:
    store = pg_stores.open(memory_dir)
    store.create_session(status="active")
    result = harness("--doctor", memory_dir=memory_dir, env=pg_stores.env)
    assert result.returncode == 0, result.stderr
    assert "Connection:   ok" in result.stdout
    assert "Sessions:     1, 0 running in other processes" in result.stdout
    assert "was not closed cleanly" in result.stdout
    assert "checks of --doctor are for the SQLite store" in result.stdout
    refused = harness("--doctor", "--repair", memory_dir=memory_dir, env=pg_stores.env)
    assert refused.returncode == 2 and "SQLite store only" in refused.stderr


@pytest.mark.slow
def test_schema_is_created_once_by_processes_opening_it_together(
    pg_stores: Stores, tmp_path: Path
) -> None:
    url = pg_stores.fresh_url()
    code = (
        "import sys; from actors.store import open_store\n"
        f"s = open_store(sys.argv[1], {url!r}); s.create_session(); s.close()"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path / f"m{i}")], cwd=REPO,
                              stderr=subprocess.PIPE, text=True) for i in range(4)]
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    store = open_store(tmp_path / "m", url)
    try:
        assert len(store.list_sessions()) == 4
        with store.db.read() as conn:
            assert conn.execute("SELECT version FROM harness_schema").fetchall() == [
                (SCHEMA_VERSION,)]
    finally:
        store.close()


def test_a_schema_from_a_newer_harness_is_refused(pg_stores: Stores, memory_dir: Path) -> None:
    store = pg_stores.open(memory_dir)
    pg_stores.write(store, "UPDATE harness_schema SET version = 99")
    with pytest.raises(StorageError, match=r"newer agent-harness \(schema 99\)"):
        open_store(memory_dir, pg_stores.url)
