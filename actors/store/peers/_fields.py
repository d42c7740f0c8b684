"""Reading fields of a peer's JSON with their types checked: a wrong type refuses the file in
one line naming the file, the line and the field (``a.jsonl: line 4: message.content must be
text or a list``), never a ``TypeError`` later."""

from __future__ import annotations

import json
from typing import Any

from actors.core.errors import InvalidRecord

_KINDS: dict[type, str] = {str: "text", dict: "an object", list: "a list", int: "an integer",
                           bool: "true or false"}


def refuse(where: str, name: str, what: str) -> InvalidRecord:
    """The refusal of field ``name`` at ``where`` (``path: line N``)."""
    return InvalidRecord(f"{where}: {name} {what}")


def get(obj: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str,
        name: str | None = None, *, default: Any = None) -> Any:
    """``obj[key]`` when it is of ``kind`` (or absent or null: ``default``); else refused."""
    value = obj.get(key)
    if value is None:
        return default
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        what = " or ".join(_KINDS.get(k, k.__name__) for k in kinds)
        raise refuse(where, name or key, f"must be {what}")
    return value


def text(value: Any) -> str:
    """A string as it is; anything else as compact JSON (for arguments and outputs)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def arguments(value: Any) -> str:
    """Tool-call arguments as a JSON object's text, as chat templates expect: an object as
    it is, a string holding a JSON object as it is, anything else wrapped
    (``{"input": …}``)."""
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):  # text, or nested past the decoder's depth
            parsed = None
        if isinstance(parsed, dict):
            return value
    return json.dumps({"input": value}, ensure_ascii=False)
