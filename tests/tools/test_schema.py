"""Argument validation against a tool's JSON schema, and the tool registry."""

from __future__ import annotations

from typing import Any

import pytest

from actors.core.errors import ToolFailed, UsageError
from actors.tools import TOOLS, Permission, Tool, ToolContext, tool_schemas, validate_arguments


async def _noop(ctx: ToolContext, args: dict[str, Any]) -> str:
    return ""


SAMPLE = Tool(
    name="sample",
    description="A tool for tests.",
    parameters={
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "count": {"type": "integer", "minimum": 1},
            "ratio": {"type": "number"},
            "flag": {"type": "boolean"},
            "items": {"type": "array"},
            "options": {"type": "object"},
            "mode": {"type": "string", "enum": ["fast", "slow"]},
        },
        "required": ["path"],
    },
    run=_noop,
)


def test_valid_arguments_pass() -> None:
    validate_arguments(SAMPLE, {"path": "a"})
    validate_arguments(
        SAMPLE,
        {
            "path": "a",
            "count": 1,
            "ratio": 2,  # an integer is a number
            "flag": False,
            "items": [1],
            "options": {},
            "mode": "slow",
        },
    )
    validate_arguments(SAMPLE, {"path": "a", "ratio": 0.5})


@pytest.mark.parametrize("args", [None, [], "path", 3, True])
def test_arguments_must_be_an_object(args: object) -> None:
    with pytest.raises(ToolFailed, match="must be a JSON object"):
        validate_arguments(SAMPLE, args)


def test_missing_required_argument() -> None:
    with pytest.raises(ToolFailed, match="missing required argument 'path'"):
        validate_arguments(SAMPLE, {"count": 2})


def test_unknown_argument_is_named_with_the_known_ones() -> None:
    with pytest.raises(ToolFailed, match="unknown argument 'colour'") as caught:
        validate_arguments(SAMPLE, {"path": "a", "colour": "red"})
    assert "path, count" in str(caught.value)


@pytest.mark.parametrize(
    ("name", "value", "expected", "got"),
    [
        ("path", 3, "a string", "integer"),
        ("count", "3", "an integer", "string"),
        ("count", True, "an integer", "boolean"),  # a bool is not an integer
        ("count", 2.5, "an integer", "number"),
        ("ratio", False, "a number", "boolean"),
        ("flag", 1, "a boolean", "integer"),
        ("items", {}, "an array", "object"),
        ("options", [], "an object", "array"),
        ("path", None, "a string", "null"),
    ],
)
def test_wrong_type(name: str, value: object, expected: str, got: str) -> None:
    args = {"path": "a", name: value}
    with pytest.raises(ToolFailed) as caught:
        validate_arguments(SAMPLE, args)
    message = str(caught.value)
    assert f"argument '{name}' must be {expected}, not {got}" in message
    assert "\n" not in message


def test_enum_and_minimum() -> None:
    with pytest.raises(ToolFailed, match="must be one of fast, slow"):
        validate_arguments(SAMPLE, {"path": "a", "mode": "medium"})
    with pytest.raises(ToolFailed, match="must be at least 1; got 0"):
        validate_arguments(SAMPLE, {"path": "a", "count": 0})


def test_real_tool_schema_is_enforced() -> None:
    todo_update = TOOLS["todo_update"]
    validate_arguments(todo_update, {"id": 1, "status": "done"})
    with pytest.raises(ToolFailed, match="must be one of"):
        validate_arguments(todo_update, {"id": 1, "status": "finished"})
    with pytest.raises(ToolFailed, match="missing required argument 'status'"):
        validate_arguments(todo_update, {"id": 1})


def test_registry_lists_every_tool_with_a_complete_schema() -> None:
    assert set(TOOLS) == {
        "read_file", "glob_files", "grep", "write_file", "edit_file", "run_bash",
        "todo_append", "todo_list", "todo_update", "read_scratchpad", "write_scratchpad",
        "read_memory", "append_memory",
        "list_sessions", "search_sessions", "read_session", "write_session_summary",
    }  # fmt: skip
    for name, tool in TOOLS.items():
        assert tool.name == name
        assert len(tool.description) > 40
        params = tool.parameters
        assert params["type"] == "object"
        assert set(params.get("required", [])) <= set(params["properties"])
    schemas = tool_schemas()
    assert [s["function"]["name"] for s in schemas] == list(TOOLS)
    assert all(s["type"] == "function" for s in schemas)


def test_permissions() -> None:
    edits = {n for n, t in TOOLS.items() if t.permission is Permission.EDIT}
    shells = {n for n, t in TOOLS.items() if t.permission is Permission.SHELL}
    assert edits == {"write_file", "edit_file", "append_memory"}
    assert shells == {"run_bash"}


def test_tool_schemas_subset_and_unknown_name() -> None:
    assert [s["function"]["name"] for s in tool_schemas(["grep", "read_file"])] == [
        "grep",
        "read_file",
    ]
    with pytest.raises(UsageError, match=r"Unknown tool.*nope"):
        tool_schemas(["read_file", "nope"])
