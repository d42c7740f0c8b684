"""The session commands of the real ``harness`` command, in subprocesses, on both backends
(``AGENT_HARNESS_STORE`` names this test's PostgreSQL schema, or "sqlite"): project-scoped
listings and ``--all``, previews, prefix ids, fork at N, info, export, flags and mistakes."""

from __future__ import annotations

import json
import os
import re
import socket
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from actors.core.compaction import summary_message
from tests.support import clitools
from tests.support.stores import Stores

pytestmark = pytest.mark.slow  # every test here starts a Python process

SYSTEM = {"role": "system", "content": "sys"}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path.resolve()


@pytest.fixture
def harness(stores: Stores, project: Path) -> Any:
    """``tests.support.clitools.harness`` with this test's store, run in the project directory."""
    return partial(clitools.harness, env=stores.env, cwd=project)


@pytest.fixture
def two_sessions(stores: Stores, memory_dir: Path, project: Path) -> tuple[str, str]:
    store = stores.open(memory_dir)
    first = store.create_session(messages=[
        SYSTEM, {"role": "user", "content": "Investigate the cache bug"},
    ], project_root=str(project))
    store.update(first, summary="Investigated the cache bug.\nThe key omits the locale.")
    second = store.create_session(
        messages=[SYSTEM, {"role": "user", "content": "Write the parser"}],
        project_root=str(project))
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


def rows(out: str) -> list[list[str]]:
    """The rows of a listing (the header left out), split on runs of two spaces."""
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["ID", "UPDATED", "MSGS", "STATUS"]
    return [re.split(r"\s{2,}", line.strip()) for line in lines[1:]]


def test_listing_is_this_projects_sessions_with_all_for_every_project(
    harness: Any, stores: Stores, memory_dir: Path, project: Path, tmp_path: Path,
    two_sessions: tuple[str, str],
) -> None:
    first, second = two_sessions
    store = stores.open(memory_dir)
    elsewhere = store.create_session(
        messages=[SYSTEM, {"role": "user", "content": "Other project work"}],
        project_root=str(tmp_path / "other"))
    empty = store.create_session(messages=[SYSTEM], project_root=str(project))
    listed = rows(ok(harness("--list-sessions", memory_dir=memory_dir)))
    assert [r[0] for r in listed] == [second, first]
    assert listed[0][1:4] == ["just now", "2", "saved"]
    assert listed[0][4] == "Write the parser"  # the provisional title; the preview is the same
    assert listed[1][4] == ("Investigate the cache bug · Investigated the cache bug. The key "
                            "omits the locale.")  # the summary written since
    everywhere = ok(harness("--list-sessions", "--all", memory_dir=memory_dir))
    assert "PROJECT" in everywhere.splitlines()[0]
    assert [r[0] for r in rows(everywhere)] == [elsewhere, second, first]
    assert "/other  " in everywhere  # a long project path keeps its end
    assert empty not in everywhere  # nobody typed anything in it
    data = json.loads(ok(harness("--list-sessions", "--json", "--all", memory_dir=memory_dir)))
    assert [d["id"] for d in data] == [elsewhere, second, first]
    assert set(data[0]) >= {"id", "title", "title_source", "status", "created_at",
                            "updated_at", "summary", "preview", "archived", "project_root",
                            "parent_id", "fork_point", "messages", "user_messages"}
    other = partial(clitools.harness, env=stores.env, cwd=tmp_path)  # a directory with none
    assert "No saved sessions for this project" in ok(
        other("--list-sessions", memory_dir=memory_dir))


def test_previews_never_show_the_internal_wrappers(
    harness: Any, stores: Stores, memory_dir: Path, project: Path
) -> None:
    store = stores.open(memory_dir)
    messages = [SYSTEM, {"role": "user", "content": "Fix the flaky test"},
                {"role": "assistant", "content": "Done."}]
    sid = store.create_session(messages=messages, project_root=str(project))
    store.replace_context(sid, [SYSTEM, summary_message("they fixed a test"), messages[2]],
                          compaction={"before_tokens": 9, "after_tokens": 5,
                                      "summary": "they fixed a test"})
    store.ensure_summary(sid)
    fork = store.fork(sid)
    for args in (("--list-sessions",), ("--info", sid), ("--info", fork),
                 ("--search", "flaky"), ("--export", sid, "--format", "markdown")):
        out = ok(harness(*args, memory_dir=memory_dir))
        assert "session_context_data" not in out and "untrusted data" not in out, args
    listed = rows(ok(harness("--list-sessions", memory_dir=memory_dir)))
    assert {r[0] for r in listed} == {sid, fork}
    assert all(r[4].split(" · ")[-1] == "Fix the flaky test" for r in listed)  # a fork's too


ATTACHED = [
    {"role": "system", "content": "You are a coding agent: the whole long system prompt."},
    {"role": "user", "content": 'look at @a.py please\n\n<attached_file path="a.py">\n'
     "SECRET_FILE_BODY\n</attached_file>", "shown": "look at @a.py please"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function",
         "function": {"name": "read_file", "arguments": '{"path": "a.py"}'}}]},
    {"role": "tool", "tool_call_id": "c1",
     "content": '<tool_result name="read_file">\n     1\tprint(1)\n     2\tmore\n</tool_result>'},
    {"role": "assistant", "content": "It prints 1."},
]


def test_human_views_show_attachments_and_results_as_labels(
    harness: Any, stores: Stores, memory_dir: Path, project: Path
) -> None:
    store = stores.open(memory_dir)
    sid = store.create_session(messages=ATTACHED, project_root=str(project))
    store.ensure_summary(sid)
    info = ok(harness("--info", sid, memory_dir=memory_dir))
    markdown = ok(harness("--export", sid, "--format", "markdown", memory_dir=memory_dir))
    for shown in (info, markdown):
        assert "look at @a.py please [attached: a.py]" in shown
        assert "1 print(1) (+1 line)" in shown
        for hidden in ("<attached_file", "SECRET_FILE_BODY", "<tool_result", "</tool_result>",
                       "whole long system prompt"):
            assert hidden not in shown, (hidden, shown)
    assert "**[1] system prompt**" in markdown
    assert re.search(r"Created:      just now \(\d{4}-\d\d-\d\d \d\d:\d\d\)", info)
    assert "+00:00" not in info  # no raw timestamp
    exported = json.loads(ok(harness("--export", sid, memory_dir=memory_dir)))
    assert exported["transcript"] == ATTACHED  # the JSON export keeps everything


def test_search_info_rename_with_prefixes(
    harness: Any, memory_dir: Path, two_sessions: tuple[str, str]
) -> None:
    first, _ = two_sessions
    out = ok(harness("--search", "CACHE locale", memory_dir=memory_dir))
    assert rows(out)[0][0] == first
    assert "No session matches" in ok(harness("--search", "nothing here", memory_dir=memory_dir))
    ok(harness("--rename", first[:6], "Cache investigation", memory_dir=memory_dir))
    info = ok(harness("--info", first[:5], memory_dir=memory_dir))
    assert f"Session:      {first}" in info
    assert "Title:        Cache investigation\n" in info
    assert "Messages:     2 in context, 2 in transcript (numbered 1 to 2), 1 typed" in info
    assert "Compactions:  0" in info
    assert "   2 You: Investigate the cache bug" in info  # numbered as --fork --at takes them
    assert json.loads(ok(harness("--info", first, "--json", memory_dir=memory_dir)))["title"] \
        == "Cache investigation"


def test_ambiguous_and_unknown_prefixes_exit_2(
    harness: Any, stores: Stores, memory_dir: Path, project: Path
) -> None:
    store = stores.open(memory_dir)
    a = store.create_session("k3m9x2p7qa", [SYSTEM, {"role": "user", "content": "a"}],
                             title="Alpha", project_root=str(project))
    b = store.create_session("k3m4zzzzzz", [SYSTEM, {"role": "user", "content": "b"}],
                             project_root=str(project))
    result = harness("--info", "k3m", memory_dir=memory_dir)
    refused(result, "'k3m' matches 2 sessions")
    assert f"{a} (Alpha)" in result.stderr and b in result.stderr
    refused(harness("--fork", "zz", memory_dir=memory_dir), "No saved session with id 'zz'")
    assert f"Session:      {b}" in ok(harness("--info", "k3m4", memory_dir=memory_dir))


def test_fork_at_a_message_with_lineage_and_its_own_cost(
    harness: Any, stores: Stores, memory_dir: Path, project: Path
) -> None:
    store = stores.open(memory_dir)
    call = {"id": "c1", "type": "function", "function": {"name": "read_file",
                                                         "arguments": "{\"path\": \"a\"}"}}
    messages = [SYSTEM, {"role": "user", "content": "read a"},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": "contents of a"},
                {"role": "assistant", "content": "a says hello"},
                {"role": "user", "content": "and now?"}, {"role": "assistant", "content": "ok"}]
    sid = store.create_session(messages=messages, project_root=str(project))
    store.update(sid, state={"total_cost_usd": 0.5, "calls": 3})
    result = harness("--fork", sid[:4], "--at", "3", memory_dir=memory_dir)
    said = ok(result).strip()
    fork = said.split()[6]
    assert said == (f"Forked {sid} at message 4 into {fork} (its messages 1 to 4); message 3 "
                    "is a tool call, so the fork keeps its results too, up to message 4. "
                    f"harness -r {fork} resumes it.")
    assert result.stderr == ""
    for listing in (ok(harness("--list-sessions", memory_dir=memory_dir)),
                    ok(harness("--search", "read", memory_dir=memory_dir))):
        [row] = [line for line in listing.splitlines() if line.startswith(fork)]
        assert f"↳ fork of {sid} at 4 · " in row  # marked in every list
    as_json = json.loads(ok(harness("--fork", sid, "--at", "4", "--json",
                                    memory_dir=memory_dir)))
    assert as_json["parent_id"] == sid and as_json["fork_point"] == 4
    info = ok(harness("--info", fork, memory_dir=memory_dir))
    assert f"Forked from:  {sid} at message 4" in info
    assert "0 model calls" in info and "$0.0000" in info
    assert "inherited from before the fork: 3 model calls, $0.5000" in info
    assert stores.open(memory_dir).load_context(fork) == messages[:4]
    markdown = ok(harness("--export", fork, "--format", "markdown", memory_dir=memory_dir))
    assert "**[3] assistant**" in markdown and "**[4] tool result**" in markdown
    assert f"- forked from: `{sid}` at message 4" in markdown
    refused(harness("--fork", sid, "--at", "99", memory_dir=memory_dir), "messages 1 to 7")


def test_fork_archive_unarchive_delete(
    harness: Any, stores: Stores, memory_dir: Path, two_sessions: tuple[str, str]
) -> None:
    first, _ = two_sessions
    said = ok(harness("--fork", first, memory_dir=memory_dir)).strip()
    fork = said.split()[3]
    assert said == f"Forked {first} into {fork} (a whole copy). harness -r {fork} resumes it."
    assert len(fork) == 10 and fork != first
    assert stores.open(memory_dir).info(fork).parent_id == first
    ok(harness("--archive", first, memory_dir=memory_dir))
    listed = ok(harness("--list-sessions", memory_dir=memory_dir))
    assert not any(line.startswith(first) for line in listed.splitlines())
    assert f"↳ fork of {first} · " in listed  # its fork says where it came from
    assert "saved, archived" in ok(harness("--list-sessions", "--include-archived",
                                           memory_dir=memory_dir))
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
    assert "**[2] user**: Investigate the cache bug" in markdown
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
        (("--llm-timeout", "soon"), "argument --llm-timeout: expected a positive number, got "
                                    "'soon'"),
        (("--max-turns", "x"), "expected a positive whole number, got 'x'"),
        (("--compact-threshold", "nan"), "expected a fraction such as 0.8"),
        (("--yes",), "--yes only confirms --delete"),
        (("--search", "  "), "needs some words"),
        (("--json",), "--json goes with --list-sessions, --search, --info, --fork or --rewind"),
        (("--format", "markdown"), "--format goes with --export"),
        (("--include-archived",), "--include-archived goes with --list-sessions or --search"),
        (("--all",), "--all goes with --list-sessions"),
        (("--at", "3"), "--at N goes with --fork ID"),
        (("--list-sessions", "hello"), "A prompt cannot be combined with --list-sessions"),
        (("-p", "x", "y"), "Give the prompt once"),
        (("--output-format", "json", "--list-sessions"), "--output-format goes with -p"),
        (("-r", "abc", "-c"), "Use either --resume or --continue"),
        (("--import", "/nonexistent.json"), "harness: skipped /nonexistent.json: no such file"),
        (("--to", "3"), "harness: --to goes with --rewind ID."),
        (("--acp", "-p", "x"), "--acp serves an editor, which picks the sessions; it cannot be "
                               "combined with a prompt"),
        (("--acp", "--list-sessions"), "cannot be combined with --list-sessions"),
    ],
)
def test_user_mistakes_exit_2_with_one_line(
    harness: Any, memory_dir: Path, args: tuple[str, ...], message: str
) -> None:
    result = harness(*args, memory_dir=memory_dir)
    refused(result, message)
    assert "_positive" not in result.stderr and "_fraction" not in result.stderr


def test_version_and_help(harness: Any, memory_dir: Path) -> None:
    version = ok(harness("--version", memory_dir=memory_dir))
    assert re.fullmatch(r"harness \d+\.\d+\.\d+\n", version)
    text = ok(harness("--help", memory_dir=memory_dir))
    assert "--output-format" in text and "exit status" in text and "-r [ID], --resume [ID]" in text


def test_resume_of_an_unknown_session_without_a_terminal(
    harness: Any, memory_dir: Path
) -> None:
    refused(harness("--resume", "BADID", memory_dir=memory_dir, input=""),
            "No saved session with id 'BADID'")
    refused(harness("--resume", "BADID", "-p", "hi", memory_dir=memory_dir),
            "No saved session with id 'BADID'")
    refused(harness("-r", memory_dir=memory_dir, input="hello"),
            "--resume without an id opens a picker, which needs a terminal")
    refused(harness("fix it", memory_dir=memory_dir, input=""),
            "harness PROMPT starts the interactive prompt, which needs a terminal")


def test_locked_session_is_refused(
    harness: Any, stores: Stores, memory_dir: Path, two_sessions: tuple[str, str]
) -> None:
    first, _ = two_sessions
    store = stores.open(memory_dir)
    holder = f"pid {os.getpid()}" + (f" on {socket.gethostname()}" if stores.is_pg else "")
    with store.lease(first):
        result = harness("--rename", first, "x", memory_dir=memory_dir)
    refused(result, f"Session '{first}' is in use by another process ({holder})")
