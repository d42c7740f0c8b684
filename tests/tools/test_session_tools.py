"""The session tools against a real SessionStore in a temporary directory."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.core.config import Mode
from actors.core.errors import ToolFailed
from actors.store import SessionStore
from actors.testing.scripted_server import Reply, ScriptedServer, ToolCall
from actors.tools import TOOLS, ToolContext, validate_arguments
from actors.tools.session_tools import READ_SESSION_CHARS
from tests.support.runtime import Recorder, running, settings_for
from tests.support.tool_context import ToolSession

pytestmark = pytest.mark.anyio


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SessionStore]:
    with SessionStore(tmp_path / "store") as opened:
        yield opened


@pytest.fixture
def here(sandbox: Path, store: SessionStore) -> Callable[..., str]:
    """Create a session of the current project (the sandbox)."""
    return functools.partial(store.create_session, project_root=str(sandbox))


@pytest.fixture
def ctx(sandbox: Path, store: SessionStore, here: Callable[..., str]) -> ToolContext:
    current = here(title="current work")
    return ToolSession(store, current).context(sandbox, store.memory_dir)


async def call(ctx: ToolContext, name: str, **args: Any) -> str:
    validate_arguments(TOOLS[name], args)
    return await TOOLS[name].run(ctx, args)


def conversation(question: str, answer: str) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": question},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "grep", "arguments": '{"pattern": "bug"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a.py:3: bug here"},
        {"role": "assistant", "content": answer},
    ]


async def test_list_sessions_most_recent_first(
    ctx: ToolContext, store: SessionStore, here: Callable[..., str]
) -> None:
    older = here(messages=conversation("q", "a"), title="older")
    newer = here(title="newer\ntitle")
    store.update(older, summary="Fixed the parser.\n" + "x" * 500)
    store.update(newer, status="aborted", touch=True)  # now the most recently updated
    lines = (await call(ctx, "list_sessions")).splitlines()
    assert [line.split(" | ")[0] for line in lines] == [newer, older, ctx.session_id]
    first = lines[0].split(" | ")
    assert first[1:3] == ["newer title", "aborted"]
    assert first[3] == store.info(newer).updated_at
    summary = lines[1].split(" | ")[4]
    assert summary.startswith("Fixed the parser. xxx")
    assert len(summary) == 200


async def test_list_sessions_is_capped(
    ctx: ToolContext, store: SessionStore, here: Callable[..., str]
) -> None:
    for i in range(51):
        here(title=f"s{i}")
    lines = (await call(ctx, "list_sessions")).splitlines()
    assert len(lines) == 51
    assert "2 older sessions not shown" in lines[-1]


async def test_search_sessions_shows_a_snippet(
    ctx: ToolContext, store: SessionStore, here: Callable[..., str]
) -> None:
    found = here(messages=conversation("why does the tokenizer crash?", "fixed"))
    here(messages=conversation("unrelated", "ok"))
    out = await call(ctx, "search_sessions", query="tokenizer")
    assert len(out.splitlines()) == 1
    assert out.startswith(found + " | ")
    assert "why does the tokenizer crash?" in out.split(" | ")[-1]
    assert await call(ctx, "search_sessions", query="nonexistentword") == (
        "No sessions match 'nonexistentword' in this project."
    )


async def test_read_session_summary_and_transcript(
    ctx: ToolContext, store: SessionStore, here: Callable[..., str]
) -> None:
    sid = here(messages=conversation("find the bug", "It is in a.py."))
    out = await call(ctx, "read_session", session_id=sid)
    assert out == (
        "Summary:\n(no summary)\n\nTranscript:\n"
        "system: You are a coding agent.\n"
        "user: find the bug\n"
        'assistant: [tool call grep({"pattern": "bug"})]\n'
        "tool: a.py:3: bug here\n"
        "assistant: It is in a.py."
    )
    store.update(sid, summary="Found the bug.")
    assert (await call(ctx, "read_session", session_id=sid)).startswith(
        "Summary:\nFound the bug.\n\nTranscript:\n"
    )


async def test_read_session_is_cut(
    ctx: ToolContext, store: SessionStore, here: Callable[..., str]
) -> None:
    sid = here(messages=conversation("z" * 20_000, "done"))
    out = await call(ctx, "read_session", session_id=sid)
    assert out.endswith(f"[... transcript cut at {READ_SESSION_CHARS} characters]")
    transcript = out.split("\n\nTranscript:\n", 1)[1]
    assert READ_SESSION_CHARS <= len(transcript) < READ_SESSION_CHARS + 100


@pytest.mark.parametrize(
    ("session_id", "message"),
    [("../etc/passwd", "Invalid session id"), ("nosuchsession", "No saved session")],
)
async def test_read_session_bad_id(ctx: ToolContext, session_id: str, message: str) -> None:
    with pytest.raises(ToolFailed, match=message):
        await call(ctx, "read_session", session_id=session_id)


async def test_write_session_summary_targets_the_current_session(
    ctx: ToolContext, store: SessionStore, here: Callable[..., str]
) -> None:
    other = here(title="other")
    assert ctx.session_id is not None
    out = await call(ctx, "write_session_summary", summary="  Refactored the CLI.  ")
    assert "Saved" in out
    assert store.info(ctx.session_id).summary == "Refactored the CLI."
    assert store.info(other).summary == ""
    with pytest.raises(ToolFailed, match="empty"):
        await call(ctx, "write_session_summary", summary="  ")


async def test_other_projects_sessions_are_not_shown(
    ctx: ToolContext, store: SessionStore, here: Callable[..., str], tmp_path: Path
) -> None:
    mine = here(messages=conversation("where is the tokenizer?", "in tok.py"), title="mine")
    theirs = store.create_session(
        messages=conversation("the tokenizer key is sk-live-123", "ok"), title="theirs",
        project_root=str(tmp_path / "other-project"),
    )
    unknown = store.create_session(title="no project recorded")
    listed = await call(ctx, "list_sessions")
    ids = [line.split(" | ")[0] for line in listed.splitlines() if " | " in line]
    assert theirs not in ids and unknown not in ids and mine in ids
    assert "2 more in other projects, not shown" in listed
    found = await call(ctx, "search_sessions", query="tokenizer")
    assert found.startswith(mine + " | ") and "sk-live" not in found
    assert "1 more in other projects" in found
    every = await call(ctx, "search_sessions", query="tokenizer", all_projects=True)
    assert "sk-live-123" in every and str(tmp_path / "other-project") in every
    wide = await call(ctx, "list_sessions", all_projects=True)
    assert theirs in wide and "(no project)" in wide


async def test_wider_reads_ask_in_every_mode_but_skip(
    ctx: ToolContext, store: SessionStore, here: Callable[..., str], tmp_path: Path
) -> None:
    mine = here(title="mine")
    theirs = store.create_session(title="theirs", project_root=str(tmp_path / "elsewhere"))
    for mode in (Mode.DEFAULT, Mode.ACCEPT_EDITS):
        for name, args in (("list_sessions", {"all_projects": True}),
                           ("search_sessions", {"query": "x", "all_projects": True}),
                           ("read_session", {"session_id": theirs})):
            reason = await TOOLS[name].ask_reason(ctx, args, mode)
            assert reason is not None and "project" in reason
        for name, args in (("list_sessions", {}), ("search_sessions", {"query": "x"}),
                           ("read_session", {"session_id": mine}),
                           ("read_session", {"session_id": "nosuchsession"})):
            assert await TOOLS[name].ask_reason(ctx, args, mode) is None
    assert await TOOLS["read_session"].ask_reason(
        ctx, {"session_id": theirs}, Mode.SKIP_PERMISSIONS) is None


async def test_a_denied_read_of_another_project_gives_nothing(tmp_path: Path) -> None:
    settings_dir = tmp_path / "run"
    store = SessionStore(settings_dir / "memory")  # the memory dir settings_for uses
    theirs = store.create_session(
        messages=conversation("deploy with password hunter2", "done"),
        project_root=str(tmp_path / "other"),
    )
    store.close()
    script = [Reply(tool_calls=[ToolCall("read_session", {"session_id": theirs})]),
              Reply("I was not allowed.")]
    with ScriptedServer(script) as server:
        settings = settings_for(settings_dir, server.base_url, mode=Mode.ACCEPT_EDITS)
        async with running(settings, recorder=Recorder(approve=False)) as (sup, rec):
            assert (await sup.run_turn("what did the other project do?")).ok
        [result] = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert len(rec.approvals) == 1 and "another project" in rec.approvals[0]
    assert "Denied" in result and "hunter2" not in result
