"""Sessions from other agents: Claude Code, Codex CLI and Gemini CLI, imported by content.

``import_sessions(store, *paths)`` is what ``harness --import`` runs: files and directories
(walked, so ``~/.claude/projects``, ``~/.codex/sessions`` and ``~/.gemini/tmp`` work), each
file recognised by its content (:mod:`._detect`): the harness's own records go to
:func:`actors.store.import_paths` as before; a peer's file is read by its module
(:mod:`.claude_code`, :mod:`.codex`, :mod:`.gemini`) into a draft, made a resumable record
(:mod:`._draft`) and inserted with ``Store.import_record`` (one transaction; an id already
there is "already present": the id is derived from the peer's own session id).

A file is hostile until checked (:mod:`._lines`): what cannot be read is one line naming the
file and the line or field, and the import goes on with the next file. A sub-agent's own
transcript is left out with a line saying so; in a directory, files that are plainly not
sessions are passed over and counted.

Layout::

    _lines.py        a file's JSON lines (or one document), bounded and checked
    _fields.py       fields read with their types checked
    _detect.py       what a file is, by content
    _draft.py        Draft, and the record it becomes (pairing, prompt, id, origin)
    claude_code.py   Claude Code's JSONL transcripts
    codex.py         Codex CLI's rollouts
    gemini.py        Gemini CLI's recordings and /chat save checkpoints

Blocking file I/O and store calls: run from a synchronous command (or a worker thread).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from actors.core.errors import InvalidRecord, StorageError, UsageError
from actors.store._portability import Records, import_paths
from actors.store.peers import claude_code, codex, gemini
from actors.store.peers._detect import detect
from actors.store.peers._draft import Draft, describe_dropped, record_of
from actors.store.peers._lines import Lines, read_lines, read_text, read_whole

__all__ = ["Imported", "Walked", "import_sessions", "read_peer"]

SUFFIXES = (".json", ".jsonl")


@dataclass
class Imported:
    """What became of one file: imported, already present, left out, or an error."""

    source: str
    label: str = ""  # "Claude Code transcript", "session record"
    session_id: str | None = None
    error: str | None = None
    skipped: bool = False  # its session is already in the store
    left_out: str | None = None  # why it is not a session to import (a sub-agent's)
    messages: int = 0
    notes: list[str] = field(default_factory=list)


@dataclass
class Walked:
    """Every file's outcome, and how many files in the directories were not sessions."""

    results: list[Imported] = field(default_factory=list)
    passed_over: int = 0


def _project_marker(path: Path) -> str:
    """The project Gemini CLI noted beside its chats (``<project dir>/.project_root``)."""
    for directory in (path.parent, path.parent.parent, path.parent.parent.parent):
        marker = directory / ".project_root"
        try:
            with marker.open(encoding="utf-8") as handle:
                root = handle.read(4097).strip()
        except (OSError, UnicodeDecodeError):
            continue
        if root.startswith("/") and len(root) <= 4096 and "\n" not in root:
            return root
    return ""


def read_peer(path: Path, kind: str, text: str) -> Draft:
    """A peer's file of format ``kind`` (from :func:`detect`) read into a draft."""
    if kind == "claude-code":
        return claude_code.read(read_lines(path, text))
    if kind == "codex":
        return codex.read(read_lines(path, text))
    if kind == "gemini-checkpoint":
        lines = Lines(path, [])
        return gemini.read_checkpoint(lines, read_whole(path, text), _project_marker(path))
    if text.lstrip().startswith("{\n"):  # the older layout: one indented document
        lines = Lines(path, [(1, read_whole(path, text))])
    else:
        lines = read_lines(path, text)
    return gemini.read(lines, _project_marker(path))


def _files(path: Path) -> list[Path]:
    found = []
    for root, dirs, names in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found += [Path(root, n) for n in sorted(names) if n.endswith(SUFFIXES)]
    return found


def _import_one(store: Records, file: Path, walking: bool, walked: Walked) -> None:
    try:
        text = read_text(file)
    except InvalidRecord as exc:
        walked.results.append(Imported(str(file), error=str(exc)))
        return
    kind = detect(text)
    if kind is None and walking:
        walked.passed_over += 1
        return
    if kind in (None, "record"):
        for result in import_paths(store, file):
            walked.results.append(Imported(result.source, "session record", result.session_id,
                                           result.error, result.skipped))
        return
    try:
        draft = read_peer(file, kind, text)
    except InvalidRecord as exc:
        walked.results.append(Imported(str(file), error=str(exc)))
        return
    if draft.left_out or not draft.messages:
        walked.results.append(Imported(str(file), draft.label,
                                       left_out=draft.left_out or "no conversation in it"))
        return
    try:
        record = record_of(draft)
        added = store.import_record(record)
    except (InvalidRecord, StorageError, UsageError) as exc:
        walked.results.append(Imported(str(file), draft.label, error=f"{file}: {exc}"))
        return
    walked.results.append(Imported(
        str(file), draft.label, record["id"], skipped=not added,
        messages=len(record["transcript"]) - 1,
        notes=describe_dropped(draft.dropped) + draft.notes))


def import_sessions(store: Records, *paths: str | os.PathLike[str]) -> Walked:
    """Import every session file in ``paths`` (files, and directories walked), each
    recognised by its content; see the module's doc."""
    walked = Walked()
    for raw in paths:
        path = Path(raw).expanduser()
        if path.is_dir():
            files = _files(path)
            before = len(walked.results), walked.passed_over
            for file in files:
                _import_one(store, file, True, walked)
            if (len(walked.results), walked.passed_over) == before:
                walked.results.append(Imported(str(path), error=f"{path}: no session files "
                                               "(*.json, *.jsonl) in it"))
        elif path.exists():
            _import_one(store, path, False, walked)
        else:
            walked.results.append(Imported(str(path), error=f"{path}: no such file"))
    return walked
