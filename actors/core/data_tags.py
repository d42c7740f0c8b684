"""Text that is data, never instructions: the tags that mark it, and escaping them.

The harness wraps text it did not write in data tags: ``<tool_result>`` (a tool's output),
``<session_context_data>`` (a compaction summary), ``<memory_notes>`` (memory notes in the
system prompt) and ``<attached_file>`` (a file the user attached with ``@path``). The system
prompt tells the model that what is inside them is data. Text put inside such a block must
therefore not be able to end it early or to open a block of its own: :func:`escape_data` is
the one function that makes it so, and every block is built with it.

It replaces the ``<`` of every opening or closing data tag, whatever its letter case and with
any whitespace, ``_`` or ``-`` between the words (``</TOOL_RESULT>``, ``< /tool-result``,
``<Memory Notes>``), by ``&lt;``. Nothing else changes, so code and markup in tool output
stay readable. :func:`escape_attribute` makes a value safe inside a double-quoted attribute.

The model's own control tokens (``<turn|>``, ``<|im_end|>``) in such text are another matter:
the server's tokenizer, not the model, would read them, so they are broken where a request is
encoded, for every message alike (:mod:`actors.core.control_tokens`).
"""

from __future__ import annotations

import re

DATA_TAGS = ("tool_result", "session_context_data", "memory_notes", "attached_file")

_SEPARATOR = r"[\s_-]*"
_TAG_NAMES = "|".join(_SEPARATOR.join(tag.split("_")) for tag in DATA_TAGS)
_DATA_TAG = re.compile(rf"<(?=\s*/?\s*(?:{_TAG_NAMES}))", re.IGNORECASE)


def escape_data(text: str) -> str:
    """``text`` with the ``<`` of every data tag in it (opening or closing) made ``&lt;``."""
    return _DATA_TAG.sub("&lt;", text)


def escape_attribute(value: str) -> str:
    """``value`` safe inside a double-quoted attribute of a data tag (one line, no markup)."""
    value = " ".join(value.split())
    return (
        value.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")
    )


def wrap_result(name: str, text: str) -> str:
    """Mark a tool's output as data; no data tag inside the output can end or open a block."""
    return f'<tool_result name="{escape_attribute(name)}">\n{escape_data(text)}\n</tool_result>'
