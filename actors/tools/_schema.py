"""Checking a tool call's arguments against the tool's JSON schema (the subset tools use).

Supported: the arguments must be an object; ``required`` properties must be present; no
property outside ``properties``; each property's ``type`` (string, integer, number, boolean,
array, object; a boolean is neither an integer nor a number), ``enum``, and ``minimum`` for
numbers. A violation raises :class:`ToolFailed` with a one-line message the model can act on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from actors.core.errors import ToolFailed

if TYPE_CHECKING:
    from actors.tools._base import Tool

_PYTHON_TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "array": list,
    "object": dict,
}

_JSON_NAMES: dict[type, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    list: "array",
    dict: "object",
    type(None): "null",
}


def json_type_name(value: object) -> str:
    """The JSON name of ``value``'s type ("string", "integer", ..., "null")."""
    return _JSON_NAMES.get(type(value), type(value).__name__)


def _has_type(value: object, expected: str) -> bool:
    if expected in ("integer", "number") and isinstance(value, bool):
        return False
    python_type = _PYTHON_TYPES.get(expected)
    return python_type is None or isinstance(value, python_type)


def validate_arguments(tool: Tool, args: object) -> dict[str, Any]:
    """``args`` if it satisfies ``tool.parameters``; else raise :class:`ToolFailed`."""
    schema = tool.parameters
    if not isinstance(args, dict):
        raise ToolFailed(
            f"Arguments of {tool.name} must be a JSON object, not {json_type_name(args)}."
        )
    properties: dict[str, Any] = schema.get("properties", {})
    for name in schema.get("required", []):
        if name not in args:
            raise ToolFailed(f"{tool.name}: missing required argument '{name}'.")
    for name, value in args.items():
        spec = properties.get(name)
        if spec is None:
            known = ", ".join(properties) or "none"
            raise ToolFailed(f"{tool.name}: unknown argument '{name}' (arguments are: {known}).")
        _check_value(tool.name, name, value, spec)
    return args


def _check_value(tool_name: str, name: str, value: object, spec: dict[str, Any]) -> None:
    expected = spec.get("type")
    if isinstance(expected, str) and not _has_type(value, expected):
        raise ToolFailed(
            f"{tool_name}: argument '{name}' must be {_article(expected)} {expected}, "
            f"not {json_type_name(value)}."
        )
    if "enum" in spec and value not in spec["enum"]:
        choices = ", ".join(str(choice) for choice in spec["enum"])
        raise ToolFailed(f"{tool_name}: argument '{name}' must be one of {choices}; got {value!r}.")
    minimum = spec.get("minimum")
    if minimum is not None and isinstance(value, int | float) and value < minimum:
        raise ToolFailed(f"{tool_name}: argument '{name}' must be at least {minimum}; got {value}.")


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"
