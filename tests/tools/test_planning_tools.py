"""The planning tools: the to-do list (with retry escalation) and the scratchpad."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from actors.core.errors import ToolFailed
from actors.core.planning import MAX_RETRIES
from actors.tools import TOOLS, ToolContext, validate_arguments
from tests.support.tool_context import ToolSession

pytestmark = pytest.mark.anyio


@pytest.fixture
def ctx(tmp_path: Path, session: ToolSession) -> ToolContext:
    return session.context(tmp_path, tmp_path / "memory")


async def call(ctx: ToolContext, name: str, **args: Any) -> str:
    validate_arguments(TOOLS[name], args)
    return await TOOLS[name].run(ctx, args)


async def test_append_list_and_update(ctx: ToolContext) -> None:
    assert await call(ctx, "todo_list") == "No to-dos."
    assert await call(ctx, "todo_append", text="  write tests ") == "Added to-do 1: write tests"
    assert await call(ctx, "todo_append", text="fix bug") == "Added to-do 2: fix bug"
    assert await call(ctx, "todo_update", id=1, status="done") == "To-do 1 is now done."
    assert await call(ctx, "todo_list") == "1. [done] write tests\n2. [pending] fix bug"
    assert await call(ctx, "todo_list", include_closed=False) == "2. [pending] fix bug"
    assert [t.status for t in ctx.planning.todos] == ["done", "pending"]


async def test_bad_requests_fail(ctx: ToolContext) -> None:
    with pytest.raises(ToolFailed, match="needs some text"):
        await call(ctx, "todo_append", text="   ")
    with pytest.raises(ToolFailed, match="No to-do with id 7"):
        await call(ctx, "todo_update", id=7, status="done")
    with pytest.raises(ToolFailed, match="must be one of"):
        await call(ctx, "todo_update", id=1, status="finished")


async def test_retries_escalate_to_the_user(ctx: ToolContext) -> None:
    await call(ctx, "todo_append", text="flaky step")
    await call(ctx, "todo_update", id=1, status="in_progress")
    for attempt in range(1, MAX_RETRIES + 1):
        await call(ctx, "todo_update", id=1, status="failed")
        await call(ctx, "todo_update", id=1, status="in_progress")  # a retry
        assert ctx.planning.todos[0].retries == attempt
    last = await call(ctx, "todo_update", id=1, status="failed")
    assert "escalate to the user" in last
    with pytest.raises(ToolFailed, match="Do not retry it again: escalate to the user"):
        await call(ctx, "todo_update", id=1, status="in_progress")
    assert ctx.planning.todos[0].status == "failed"
    assert f"(retries: {MAX_RETRIES})" in await call(ctx, "todo_list")


async def test_scratchpad_is_replaced(ctx: ToolContext) -> None:
    assert "empty" in await call(ctx, "read_scratchpad")
    assert "5 characters" in await call(ctx, "write_scratchpad", content="first")
    await call(ctx, "write_scratchpad", content="second\nline")
    assert await call(ctx, "read_scratchpad") == "second\nline"
    assert ctx.planning.scratchpad == "second\nline"
