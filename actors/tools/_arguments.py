"""Decoding a tool call's arguments: the JSON text the model sent, with bounds.

The executor calls :func:`parse_arguments` instead of ``json.loads``. Whatever the model sends,
the result is either a decoded value or :class:`ToolFailed` with a one-line message that becomes
that call's result; nothing escapes to fail the whole turn. Bounds:

- the text is at most :data:`MAX_ARGUMENT_BYTES` long;
- an integer has at most :data:`MAX_INTEGER_DIGITS` digits (Python refuses to convert more than
  4300 with a ``ValueError``, and a huge one would be slow to convert and to print);
- a number is finite (``1e400``, ``NaN`` and ``Infinity`` are refused);
- objects and arrays nest at most :data:`MAX_DEPTH` deep (a 100,000-deep nesting would otherwise
  end in a ``RecursionError`` in the decoder or, later, in the encoder that saves the result).

Pure computation, bounded by the size limit: safe to call on the event loop.
"""

from __future__ import annotations

import json
import math
from typing import Any

from actors.core.errors import ToolFailed

MAX_ARGUMENT_BYTES = 8 * 1024 * 1024
MAX_INTEGER_DIGITS = 100
MAX_DEPTH = 100

_HINT = "Send a JSON object matching the tool's schema."


class _Refused(ValueError):
    """A value the decoder must not produce (raised from its hooks)."""


def _integer(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INTEGER_DIGITS:
        raise _Refused(f"an integer with {digits} digits (at most {MAX_INTEGER_DIGITS})")
    return int(text)


def _number(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"the number {text[:40]} is out of range")
    return value


def _constant(text: str) -> Any:
    raise _Refused(f"{text} is not valid JSON")


def _depth_exceeds(value: object, limit: int) -> bool:
    """Whether ``value`` nests deeper than ``limit`` (iterative: no recursion to exhaust)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def parse_arguments(raw: object) -> object:
    """The decoded arguments of one call; see the module docstring for the bounds.

    ``raw`` is normally the JSON text of the call; an empty text means no arguments (``{}``).
    A value that is already decoded (some servers send an object) is checked for depth and
    returned as it is. The caller validates the result against the tool's schema.
    """
    if raw is None or raw == "":
        return {}
    if not isinstance(raw, str):
        if _depth_exceeds(raw, MAX_DEPTH):
            raise ToolFailed(f"the arguments nest deeper than {MAX_DEPTH} levels. {_HINT}")
        return raw
    size = len(raw.encode("utf-8", errors="replace"))
    if size > MAX_ARGUMENT_BYTES:
        raise ToolFailed(
            f"the arguments are {size} bytes long (at most {MAX_ARGUMENT_BYTES}). {_HINT}"
        )
    try:
        value = json.loads(
            raw, parse_int=_integer, parse_float=_number, parse_constant=_constant
        )
    except _Refused as exc:
        raise ToolFailed(f"the arguments hold {exc}. {_HINT}") from None
    except json.JSONDecodeError as exc:
        raise ToolFailed(f"the arguments are not valid JSON ({exc}). {_HINT}") from None
    except RecursionError:
        raise ToolFailed(f"the arguments nest deeper than {MAX_DEPTH} levels. {_HINT}") from None
    except ValueError as exc:  # anything else the decoder refuses, in one line
        raise ToolFailed(f"the arguments cannot be decoded ({exc}). {_HINT}") from None
    if _depth_exceeds(value, MAX_DEPTH):
        raise ToolFailed(f"the arguments nest deeper than {MAX_DEPTH} levels. {_HINT}")
    return value
