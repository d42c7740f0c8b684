"""Sessions as people scan them: relative times, aligned columns, titles and clean previews.

One row per session: id, when it was last updated ("3 h ago"), how many messages it holds,
its status, the project (with ``--all``), the title (after ``↳ fork of ID at N`` for a
fork) and a one-line preview of the latest thing typed (or the summary written since).
``--list-sessions``, ``\\sessions`` and the resume picker all use these functions;
``--json`` prints the store's entries unchanged. Pure functions (the clock is a parameter).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from actors.core.previews import one_line

UNTITLED = "(untitled)"


def parse_time(text: str) -> datetime | None:
    """A stored timestamp (ISO 8601), or None if it is not one."""
    try:
        moment = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def ago(text: str, now: datetime | None = None) -> str:
    """``just now``, ``12 min ago``, ``3 h ago``, ``yesterday``, ``5 days ago``, or the local
    date (``2026-11-03``) from 30 days on (or for a time to come: another machine's clock)."""
    moment = parse_time(text)
    if moment is None:
        return text
    seconds = ((now or datetime.now(UTC)) - moment).total_seconds()
    if seconds < -60:
        return moment.astimezone().date().isoformat()
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{int(seconds // 60)} min ago"
    if seconds < 86_400:
        return f"{int(seconds // 3600)} h ago"
    days = int(seconds // 86_400)
    if days == 1:
        return "yesterday"
    if days < 30:
        return f"{days} days ago"
    return moment.astimezone().date().isoformat()


def local_time(text: str) -> str:
    """A stored timestamp in this machine's time zone, to the minute: ``2026-11-03 14:02``."""
    moment = parse_time(text)
    return text if moment is None else moment.astimezone().strftime("%Y-%m-%d %H:%M")


def when(text: str, now: datetime | None = None) -> str:
    """A timestamp for people: ``3 h ago (2026-12-01 14:02)`` while recent, the local date
    and time after (as ``--info`` shows them)."""
    relative, exact = ago(text, now), local_time(text)
    if relative in (exact[:10], text):  # an old one (or not a timestamp): the date says it
        return exact
    return f"{relative} ({exact})"


def project_name(root: str, home: str | None = None) -> str:
    """A project directory as a short name: ``~/src/shop``, or ``(unknown)``."""
    if not root:
        return "(unknown)"
    home = home if home is not None else str(Path.home())
    if home and (root == home or root.startswith(home.rstrip("/") + "/")):
        return "~" + root[len(home.rstrip("/")):]
    return root


def status_of(item: Mapping[str, Any]) -> str:
    return str(item.get("status", "")) + (", archived" if item.get("archived") else "")


def preview_of(item: Mapping[str, Any]) -> str:
    """What a row shows after the title: a search's snippet, else the preview, else the
    summary; never the harness's own wrappers."""
    for key in ("snippet", "preview", "summary"):
        text = item.get(key)
        if text:
            shown = one_line(str(text))
            if key == "snippet" and item.get("message"):
                shown = f"#{item['message']}: {shown}"
            return shown
    return ""


def lineage(item: Mapping[str, Any]) -> str:
    """``fork of ID at message N`` (or ``fork of ID``), "" for a session that is no fork."""
    parent = item.get("parent_id")
    if not parent:
        return ""
    at = item.get("fork_point")
    return f"fork of {parent}" + (f" at message {at}" if at else "")


def fork_mark(item: Mapping[str, Any]) -> str:
    """``↳ fork of ID at N`` (or ``↳ fork of ID``, a whole copy), "" for no fork: what marks
    a fork in every list, before its title (which is its parent's at first)."""
    parent = item.get("parent_id")
    if not parent:
        return ""
    at = item.get("fork_point")
    return f"↳ fork of {parent}" + (f" at {at}" if at else "")


def _cut(text: str, width: int) -> str:
    if width <= 0:
        return ""
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def table(
    items: Sequence[Mapping[str, Any]],
    *,
    with_project: bool = False,
    width: int | None = None,
    now: datetime | None = None,
    mark: str | None = None,
) -> list[str]:
    """The rows of a listing with a header; ``width`` cuts each line to fit (None: the
    preview is cut at 100 characters); ``mark`` is the id to flag with ``*``."""
    headers = ["ID", "UPDATED", "MSGS", "STATUS"] + (["PROJECT"] if with_project else [])
    now = now or datetime.now(UTC)
    home = str(Path.home()) if with_project else ""
    names: dict[str, str] = {}  # a project's short name, worked out once per listing
    rows = []
    for item in items:
        cells = [str(item["id"]), ago(str(item.get("updated_at", "")), now),
                 str(item.get("messages", "")), status_of(item)]
        if with_project:
            root = str(item.get("project_root", ""))
            name = names.get(root)
            if name is None:
                name = names[root] = project_name(root, home)
            cells.append(name if len(name) <= 32 else "…" + name[-31:])  # the end says most
        rows.append(cells)
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    prefix = "  " if mark is not None else ""

    def line(cells: list[str], rest: str, star: bool) -> str:
        padded = [c.rjust(w) if i == 2 else c.ljust(w)
                  for i, (c, w) in enumerate(zip(cells, widths, strict=True))]
        text = ("* " if star else prefix) + "  ".join(padded) + "  " + rest
        return _cut(text, width) if width is not None else text.rstrip()

    lines = [line(headers, "TITLE · PREVIEW", False)]
    for item, cells in zip(items, rows, strict=True):
        title = one_line(str(item.get("title") or "")) or UNTITLED
        preview = preview_of(item)
        if preview and preview != title:
            rest = f"{title} · {preview if width is not None else _cut(preview, 100)}"
        else:
            rest = title
        forked = fork_mark(item)
        if forked:
            rest = f"{forked} · {rest}"
        lines.append(line(cells, rest, mark is not None and item["id"] == mark))
    return lines


def terminal_width() -> int | None:
    """The terminal's width when stdout is one (None for a pipe, a file, or a terminal that
    reports 0 columns, as under ``script`` and some editors' terminals: unknown)."""
    try:
        if not os.isatty(1):
            return None
        columns = os.get_terminal_size(1).columns
    except OSError:
        return None
    return columns if columns > 0 else None
