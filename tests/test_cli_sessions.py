"""The session commands of the real ``harness`` command, in subprocesses, on both backends
(``AGENT_HARNESS_STORE`` names this test's PostgreSQL schema, or "sqlite")."""

from __future__ import annotations

import json
import os
import socket
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from tests import clitools
from tests.stores import Stores

pytestmark = pytest.mark.slow  # every test here starts a Python process


@pytest.fixture
def harness(stores: Stores) -> Any:
    """``tests.clitools.harness`` with this test's store."""
    return partial(clitools.harness, env=stores.env)


@pytest.fixture
def two_sessions(stores: Stores, memory_dir: Path) -> tuple[str, str]:
    store = stores.open(memory_dir)
    first = store.create_session(messages=[
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "Investigate the cache bug"},
    ])
    store.update(first, summary="Investigated the cache bug.\nThe key omits the locale.")
    second = store.create_session(messages=[{"role": "user", "content": "Write the parser"}])
    store.close()
    return first, second


def ok(result) -> str:  # type: ignore[no-untyped-def]
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return str(result.stdout)


def refused(result, message: str) -> None:  # type: ignore[no-untyped-def]
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_list_sessions_lines_and_json(
    harness: Any, stores: Stores, memory_dir: Path, two_sessions: tuple[str, str]
) -> None:
    first, second = two_sessions
    lines = ok(harness("--list-sessions", memory_dir=memory_dir)).splitlines()
    assert [line.split(" | ")[0] for line in lines] == [first, second][::-1]
    assert lines[1] == " | ".join(
        [first, "", "saved", stores.open(memory_dir).info(first).updated_at,
         "Investigated the cache bug. The key omits the locale."]
    )
    data = json.loads(ok(harness("--list-sessions", "--json", memory_dir=memory_dir)))
    assert {d["id"] for d in data} == {first, second}


def test_search_info_rename(
    harness: Any, memory_dir: Path, two_sessions: tuple[str, str]
) -> None:
    first, _ = two_sessions
    out = ok(harness("--search", "CACHE locale", memory_dir=memory_dir))
    assert out.startswith(first + " | ")
    assert "No session matches" in ok(harness("--search", "nothing here", memory_dir=memory_dir))
    ok(harness("--rename", first, "Cache investigation", memory_dir=memory_dir))
    info = ok(harness("--info", first, memory_dir=memory_dir))
    assert f"Session:      {first}" in info
    assert "Title:        Cache investigation" in info
    assert "Messages:     2 in context, 2 in transcript" in info
    assert "Compactions:  0" in info
    assert json.loads(ok(harness("--info", first, "--json", memory_dir=memory_dir)))["title"] \
        == "Cache investigation"


def test_fork_archive_unarchive_delete(
    harness: Any, stores: Stores, memory_dir: Path, two_sessions: tuple[str, str]
) -> None:
    first, _ = two_sessions
    fork = ok(harness("--fork", first, memory_dir=memory_dir)).strip()
    assert len(fork) == 10 and fork != first
    assert stores.open(memory_dir).info(fork).parent_id == first
    ok(harness("--archive", first, memory_dir=memory_dir))
    listed = ok(harness("--list-sessions", memory_dir=memory_dir))
    assert first not in listed
    assert first in ok(harness("--list-sessions", "--include-archived", memory_dir=memory_dir))
    ok(harness("--unarchive", first, memory_dir=memory_dir))
    refused(harness("--delete", fork, memory_dir=memory_dir), "add --yes")
    ok(harness("--delete", fork, "--yes", memory_dir=memory_dir))
    refused(harness("--info", fork, memory_dir=memory_dir), f"No saved session with id '{fork}'")


def test_export_json_and_markdown_then_import(
    harness: Any, memory_dir: Path, two_sessions: tuple[str, str], tmp_path: Path
) -> None:
    first, _ = two_sessions
    exported = ok(harness("--export", first, memory_dir=memory_dir))
    record = json.loads(exported)
    assert record["format_version"] == 1 and record["id"] == first
    markdown = ok(harness("--export", first, "--format", "markdown", memory_dir=memory_dir))
    assert "**user**: Investigate the cache bug" in markdown
    path = tmp_path / "session.json"
    path.write_text(exported)
    other = tmp_path / "other-memory"  # SQLite there: from PostgreSQL, a move between backends
    to_other = partial(clitools.harness, "--store", "sqlite", memory_dir=other)
    assert f"Imported {first}" in ok(to_other("--import", str(path)))
    assert "Already present" in ok(to_other("--import", str(path)))
    assert json.loads(ok(to_other("--export", first))) == record
    broken = tmp_path / "broken.json"
    broken.write_text("[]")
    result = to_other("--import", str(broken))
    assert result.returncode == 2 and "broken.json" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--info", "../../etc/passwd"), "Invalid session id"),
        (("--info", "nope"), "No saved session with id 'nope'"),
        (("--rename", "a b", "x"), "Invalid session id"),
        (("--fork", "missing"), "No saved session"),
        (("--list-sessions", "--search", "x"), "not allowed with argument"),
        (("--max-turns", "0"), "must be positive"),
        (("--yes",), "--yes only confirms --delete"),
        (("--search", "  "), "needs some words"),
    ],
)
def test_user_mistakes_exit_2_with_one_line(
    harness: Any, memory_dir: Path, args: tuple[str, ...], message: str
) -> None:
    refused(harness(*args, memory_dir=memory_dir), message)


def test_locked_session_is_refused(
    harness: Any, stores: Stores, memory_dir: Path, two_sessions: tuple[str, str]
) -> None:
    first, _ = two_sessions
    store = stores.open(memory_dir)
    holder = f"pid {os.getpid()}" + (f" on {socket.gethostname()}" if stores.is_pg else "")
    with store.lease(first):
        result = harness("--rename", first, "x", memory_dir=memory_dir)
    refused(result, f"Session '{first}' is in use by another process ({holder})")
