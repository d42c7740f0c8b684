"""Reading another agent's session file as hostile JSON: one value per line, or one in all.

Every line goes through the same bounded decoder and checks as an imported record
(:func:`actors.store._hostile.decode_record`, :func:`~actors.store._hostile.check_values`):
integers of at most 100 digits, finite numbers, nesting at most 100 deep, valid Unicode. A
line that fails them refuses the whole file, in one line naming the file, the line and the
field (``a.jsonl: line 7: message.content[0].text holds a lone surrogate``): an import must
not change what the conversation says. The one exception is the last line when it is not
JSON at all: a peer killed while writing leaves exactly that, and the peers' own readers
skip it; it is left out with a note.

Blocking file I/O: called from a worker thread or a synchronous command.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from actors.core.errors import InvalidRecord
from actors.store._hostile import check_values, decode_record

MAX_FILE_BYTES = 1 << 30  # a session file larger than 1 GiB is refused, not read into memory


@dataclass
class Lines:
    """The JSON values of a file's lines, with their 1-based line numbers."""

    path: Path
    values: list[tuple[int, Any]]
    notes: list[str] = field(default_factory=list)  # e.g. an incomplete last line left out

    def where(self, number: int) -> str:
        """``path: line N``: how a refusal names a line."""
        return f"{self.path}: line {number}"


def read_text(path: Path) -> str:
    """The file's text; :class:`InvalidRecord` naming it when it cannot be read as UTF-8."""
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise InvalidRecord(f"{path}: larger than {MAX_FILE_BYTES >> 20} MiB")
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidRecord(f"{path}: {exc}") from None


def read_lines(path: Path, text: str | None = None) -> Lines:
    """Every non-blank line of ``path`` as a checked JSON value (see the module's rules)."""
    text = read_text(path) if text is None else text
    raw = text.split("\n")
    last = max((i for i, line in enumerate(raw) if line.strip()), default=-1)
    lines = Lines(path, [])
    for index, line in enumerate(raw):
        if not line.strip():
            continue
        source = lines.where(index + 1)
        try:
            value = decode_record(line, source)
        except InvalidRecord as exc:
            if index == last and "not valid JSON" in str(exc) and index > 0:
                lines.notes.append(f"line {index + 1}: an incomplete last line left out "
                                   "(the program was stopped while writing it)")
                continue
            raise
        check_values(value, source)
        lines.values.append((index + 1, value))
    return lines


def read_whole(path: Path, text: str | None = None) -> Any:
    """The file's one JSON value, checked (for peers that write a single document)."""
    text = read_text(path) if text is None else text
    value = decode_record(text, str(path))
    check_values(value, str(path))
    return value
