"""``@path`` in a message attaches that file (or a directory's file list) to what is sent.

``fix the rounding in @calc.py`` is sent as the text typed followed by::

    <attached_file path="calc.py">
    …the file…
    </attached_file>

while the transcript keeps what was typed (the supervisor's ``run_turn(sent, shown=typed)``).
A mention is ``@`` at the start or after a space, then a path inside the project (trailing
punctuation such as ``,`` or ``.`` is not part of it when the name without it exists). Files
are read by the tools' rules (inside the project, no link out, not the harness's state) and
at most :data:`ATTACH_LIMIT` bytes each, :data:`TOTAL_LIMIT` in all; what is cut says so.
A directory attaches the list of its files. A path that does not exist is left as typed.
Each attachment gets a one-line note for the user (``attached calc.py (1.2 KB)``).

The content is data: escaped with the one function for data tags, like a tool's result.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from actors.core.data_tags import escape_attribute, escape_data
from actors.core.errors import ToolFailed
from repl.interactive.project_files import ProjectFiles

ATTACH_LIMIT = 32 * 1024
TOTAL_LIMIT = 96 * 1024
_MENTION = re.compile(r"(?:(?<=\s)|^)@(\S+)")
_TRAILING = ",.;:!?)]}'\""


@dataclass
class Attached:
    """The message to send and what to tell the user about it."""

    sent: str
    notes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.notes)


def _size(count: int) -> str:
    return f"{count} bytes" if count < 1024 else f"{count / 1024:.1f} KB"


def _candidates(word: str) -> list[str]:
    """The mention itself, then without trailing punctuation."""
    out = [word]
    while word and word[-1] in _TRAILING:
        word = word[:-1]
        out.append(word)
    return [w for w in out if w]


def attach(text: str, files: ProjectFiles) -> Attached:
    """``text`` with its ``@path`` mentions attached (blocking: reads files)."""
    blocks: list[str] = []
    notes: list[str] = []
    seen: set[str] = set()
    budget = TOTAL_LIMIT
    for match in _MENTION.finditer(text):
        for path in _candidates(match.group(1)):
            if path in seen:
                break
            try:
                if files.is_directory(path):
                    seen.add(path)
                    names, more = files.listing(path)
                    listing = "\n".join(names) + ("\n[... more entries not listed]"
                                                  if more else "")
                    blocks.append(_block(path, listing or "(empty directory)", "directory"))
                    notes.append(f"attached the file list of {path}/ ({len(names)} entries"
                                 + (", cut" if more else "") + ")")
                    break
                read = files.read(path, min(ATTACH_LIMIT, budget))
            except ToolFailed as exc:
                notes.append(f"@{path} not attached: {exc}")
                seen.add(path)
                break
            if read.missing:
                continue
            seen.add(path)
            content = read.data.decode("utf-8", errors="replace")
            cut = read.size > len(read.data)
            budget -= len(read.data)
            if cut:
                content += (f"\n[... cut: the file has {read.size:,} bytes; the first "
                            f"{len(read.data):,} are attached. Use read_file for the rest.]")
            blocks.append(_block(path, content, "file"))
            notes.append(f"attached {path} ({_size(read.size)}"
                         + (f", cut to {_size(len(read.data))}" if cut else "") + ")")
            break
        if budget <= 0:
            notes.append("no more files attached: the attachments reached "
                         f"{_size(TOTAL_LIMIT)}")
            break
    if not blocks:
        return Attached(text, notes)
    return Attached(text + "\n\n" + "\n\n".join(blocks), notes)


def _block(path: str, content: str, kind: str) -> str:
    attribute = f' kind="{kind}"' if kind != "file" else ""
    body = escape_data(content)
    if not body.endswith("\n"):
        body += "\n"
    return f'<attached_file path="{escape_attribute(path)}"{attribute}>\n{body}</attached_file>'
