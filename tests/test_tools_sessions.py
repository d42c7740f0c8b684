"""The session tools against a real SessionStore in a temporary directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.core.errors import ToolFailed
from actors.core.planning import Planning
from actors.store import SessionStore
from actors.tools import TOOLS, ToolContext, validate_arguments
from actors.tools.session_tools import READ_SESSION_CHARS

pytestmark = pytest.mark.anyio


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SessionStore]:
    with SessionStore(tmp_path / "store") as opened:
        yield opened


@pytest.fixture
def ctx(sandbox: Path, store: SessionStore) -> ToolContext:
    current = store.create_session(title="current work")
    return ToolContext(
        sandbox=sandbox,
        memory_dir=store.memory_dir,
        planning=Planning(),
        store=store,
        session_id=current,
    )


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


async def test_list_sessions_most_recent_first(ctx: ToolContext, store: SessionStore) -> None:
    older = store.create_session(messages=conversation("q", "a"), title="older")
    newer = store.create_session(title="newer\ntitle")
    store.update(older, summary="Fixed the parser.\n" + "x" * 500)
    store.update(newer, status="aborted")  # now the most recently updated
    lines = (await call(ctx, "list_sessions")).splitlines()
    assert [line.split(" | ")[0] for line in lines] == [newer, older, ctx.session_id]
    first = lines[0].split(" | ")
    assert first[1:3] == ["newer title", "aborted"]
    assert first[3] == store.info(newer).updated_at
    summary = lines[1].split(" | ")[4]
    assert summary.startswith("Fixed the parser. xxx")
    assert len(summary) == 200


async def test_list_sessions_is_capped(ctx: ToolContext, store: SessionStore) -> None:
    for i in range(51):
        store.create_session(title=f"s{i}")
    lines = (await call(ctx, "list_sessions")).splitlines()
    assert len(lines) == 51
    assert "2 older sessions not shown" in lines[-1]


async def test_search_sessions_shows_a_snippet(ctx: ToolContext, store: SessionStore) -> None:
    found = store.create_session(messages=conversation("why does the tokenizer crash?", "fixed"))
    store.create_session(messages=conversation("unrelated", "ok"))
    out = await call(ctx, "search_sessions", query="tokenizer")
    assert len(out.splitlines()) == 1
    assert out.startswith(found + " | ")
    assert "why does the tokenizer crash?" in out.split(" | ")[-1]
    assert await call(ctx, "search_sessions", query="nonexistentword") == (
        "No sessions match 'nonexistentword'."
    )


async def test_read_session_summary_and_transcript(ctx: ToolContext, store: SessionStore) -> None:
    sid = store.create_session(messages=conversation("find the bug", "It is in a.py."))
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


async def test_read_session_is_cut(ctx: ToolContext, store: SessionStore) -> None:
    sid = store.create_session(messages=conversation("z" * 20_000, "done"))
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
    ctx: ToolContext, store: SessionStore
) -> None:
    other = store.create_session(title="other")
    assert ctx.session_id is not None
    out = await call(ctx, "write_session_summary", summary="  Refactored the CLI.  ")
    assert "Saved" in out
    assert store.info(ctx.session_id).summary == "Refactored the CLI."
    assert store.info(other).summary == ""
    with pytest.raises(ToolFailed, match="empty"):
        await call(ctx, "write_session_summary", summary="  ")


async def test_without_a_store_or_session(sandbox: Path, store: SessionStore) -> None:
    bare = ToolContext(sandbox=sandbox, memory_dir=sandbox, planning=Planning())
    with pytest.raises(ToolFailed, match="No session store"):
        await call(bare, "list_sessions")
    with pytest.raises(ToolFailed, match="No session store"):
        await call(bare, "write_session_summary", summary="x")
    no_session = ToolContext(sandbox=sandbox, memory_dir=sandbox, planning=Planning(), store=store)
    with pytest.raises(ToolFailed, match="no saved session"):
        await call(no_session, "write_session_summary", summary="x")
