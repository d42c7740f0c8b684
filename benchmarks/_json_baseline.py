"""A baseline re-implementation of the design notes' JSON-file session store.

This is **not** part of agent-harness: it exists only so that ``benchmarks/store.py`` can
compare the SQLite store against the design the notes describe (written from that
description, not copied). It keeps the notes' costs on purpose:

* one ``sessions/<id>.json`` file per session holding the whole record (working context
  ``messages`` *and* the full ``transcript``);
* every save loads the record, checks the context prefix, extends the transcript and rewrites
  the whole file with ``json.dump(indent=2, ensure_ascii=False)`` into a temporary file in the
  same directory, then ``flush`` + ``fsync`` + ``os.replace``;
* the notes' checkpoint is two such writes: :meth:`save_messages` then ``update(state=...)``;
* every write holds the session's advisory ``flock`` lease on ``sessions/<id>.lock``;
* :meth:`list_sessions` reads every file, and then (like the notes' ``SessionStore`` subclass)
  loads each record again for title/archived/status; :meth:`search_sessions` lists, loads each
  record once more and substring-matches every query word in its lowercased JSON.
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import json
import os
import re
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

INTERRUPTED = "Execution interrupted; outcome unknown. Inspect state before retrying."
_ID = re.compile(r"[A-Za-z0-9_-]+")


def _timestamp() -> str:
    """Now as ISO 8601 UTC (the notes' record timestamps)."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def _serializable_messages(messages: list[Any]) -> list[dict[str, Any]]:
    """Messages as JSON-ready dicts (SDK objects through ``model_dump``), as in the notes."""
    result: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, dict):
            result.append(message)
        elif hasattr(message, "model_dump"):
            result.append(message.model_dump(exclude_none=True))
        else:
            raise TypeError(f"Cannot persist message of type {type(message).__name__}")
    return result


class JsonSessionStore:
    """The notes' session store: ``<memory_dir>/sessions/<id>.json``, rewritten on each save."""

    def __init__(self, memory_dir: str | os.PathLike[str]) -> None:
        self.memory_dir = Path(memory_dir)
        self.sessions_dir = self.memory_dir / "sessions"
        self.sessions_dir.mkdir(parents=True, exist_ok=True)
        self._leases: dict[str, IO[str]] = {}

    # -- files and the lease ---------------------------------------------------------------

    def _session_path(self, session_id: str) -> Path:
        if not _ID.fullmatch(session_id):
            raise ValueError("session id contains invalid characters")
        return self.sessions_dir / f"{session_id}.json"

    @contextlib.contextmanager
    def lease(self, session_id: str) -> Iterator[None]:
        """Hold ``sessions/<id>.lock`` with a non-blocking ``flock`` (re-entrant here)."""
        path = self._session_path(session_id).with_suffix(".lock")
        if session_id in self._leases:
            yield
            return
        with path.open("a") as file:
            try:
                fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise ValueError(
                    f"Session '{session_id}' is in use by another process."
                ) from None
            self._leases[session_id] = file
            try:
                yield
            finally:
                del self._leases[session_id]
                fcntl.flock(file, fcntl.LOCK_UN)

    def _write_session(self, session_id: str, data: dict[str, Any]) -> None:
        """Rewrite the whole record: temp file in the same dir, fsync, atomic replace."""
        with self.lease(session_id):
            path = self._session_path(session_id)
            data["updated_at"] = _timestamp()
            fd, temp = tempfile.mkstemp(dir=self.sessions_dir, suffix=".tmp")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as file:
                    json.dump(data, file, ensure_ascii=False, indent=2)
                    file.write("\n")
                    file.flush()
                    os.fsync(file.fileno())
                os.replace(temp, path)
            finally:
                if os.path.exists(temp):
                    os.unlink(temp)

    # -- records ---------------------------------------------------------------------------

    def create_session(
        self, session_id: str, messages: list[Any], *, title: str = "", project_root: str = ""
    ) -> None:
        """Create the record with the notes' fields and write it."""
        now = _timestamp()
        incoming = _serializable_messages(messages)
        self._write_session(
            session_id,
            {
                "id": session_id,
                "created_at": now,
                "updated_at": now,
                "summary": "",
                "messages": incoming,
                "transcript": copy.deepcopy(incoming),
                "title": title,
                "archived": False,
                "status": "saved",
                "project_root": project_root,
                "state": {},
                "compactions": [],
            },
        )

    def put_record(self, record: dict[str, Any]) -> None:
        """Write a complete record as it is (benchmark setup: one write per session)."""
        self._write_session(record["id"], record)

    def load_session(self, session_id: str) -> dict[str, Any]:
        """Read and parse the whole record, filling the notes' defaults for older ones."""
        path = self._session_path(session_id)
        if not path.exists():
            raise ValueError(f"No saved session with id '{session_id}'.")
        record: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        record.setdefault("transcript", copy.deepcopy(record["messages"]))
        record.setdefault("title", "")
        record.setdefault("archived", False)
        record.setdefault("state", {})
        record.setdefault("compactions", [])
        return record

    def save_messages(self, session_id: str, messages: list[Any]) -> None:
        """Save the working context: it must extend the saved one; new messages go to the
        transcript; the whole record is rewritten."""
        with self.lease(session_id):
            record = self.load_session(session_id)
            incoming = _serializable_messages(messages)
            previous = record["messages"]
            if incoming[: len(previous)] != previous:
                raise ValueError("Context changed unexpectedly; use compact() to replace it.")
            record["transcript"].extend(copy.deepcopy(incoming[len(previous) :]))
            record["messages"] = incoming
            self._write_session(session_id, record)

    def update(self, session_id: str, **fields: Any) -> None:
        """Set metadata fields (e.g. ``state``): load, change, rewrite the whole record."""
        with self.lease(session_id):
            record = self.load_session(session_id)
            record.update(fields)
            self._write_session(session_id, record)

    def checkpoint(self, session_id: str, messages: list[Any], state: dict[str, Any]) -> None:
        """The notes' checkpoint helper: ``save_messages`` then ``update(state=...)``."""
        self.save_messages(session_id, messages)
        self.update(session_id, state=state)

    def write_summary(self, session_id: str, summary: str) -> str:
        """Replace the summary (a whole-record rewrite)."""
        with self.lease(session_id):
            session = self.load_session(session_id)
            session["summary"] = summary.strip()
            self._write_session(session_id, session)
        return "Saved session summary."

    # -- listing and search ----------------------------------------------------------------

    def _list_basic(self) -> list[dict[str, Any]]:
        """The notes' base listing: read every ``*.json`` file, newest first."""
        sessions = []
        for path in self.sessions_dir.glob("*.json"):
            try:
                session = json.loads(path.read_text(encoding="utf-8"))
                sessions.append(
                    {
                        "id": session["id"],
                        "updated_at": session["updated_at"],
                        "summary": session.get("summary", ""),
                    }
                )
            except (OSError, json.JSONDecodeError, KeyError):
                continue
        return sorted(sessions, key=lambda item: item["updated_at"], reverse=True)

    def list_sessions(self, include_archived: bool = False) -> list[dict[str, Any]]:
        """The notes' subclass listing: each listed record is loaded again for its metadata."""
        result = []
        for item in self._list_basic():
            try:
                record = self.load_session(item["id"])
            except (ValueError, OSError):
                continue
            if include_archived or not record["archived"]:
                result.append(
                    {
                        **item,
                        "title": record["title"],
                        "archived": record["archived"],
                        "status": record.get("status", "saved"),
                    }
                )
        return result

    def search_sessions(self, query: str) -> list[dict[str, Any]]:
        """Sessions whose lowercased JSON contains every ``\\w+`` word of the query."""
        terms = set(re.findall(r"\w+", query.lower()))
        matches = []
        for session in self.list_sessions():
            record = self.load_session(session["id"])
            haystack = json.dumps(record, ensure_ascii=False).lower()
            if all(term in haystack for term in terms):
                matches.append(session)
        return matches

    # -- recovery --------------------------------------------------------------------------

    def recover(self, session_id: str) -> list[dict[str, Any]]:
        """Answer every tool call lacking a result with the "outcome unknown" notice.

        The notices go into the working context (after the call's result block) and are
        appended to the transcript; the record is rewritten only if something was added.
        Returns the working context.
        """
        with self.lease(session_id):
            record = self.load_session(session_id)
            fixed: list[dict[str, Any]] = []
            added: list[dict[str, Any]] = []
            pending: list[str] = []

            def close_block() -> None:
                for call_id in pending:
                    notice = {"role": "tool", "tool_call_id": call_id, "content": INTERRUPTED}
                    fixed.append(notice)
                    added.append(notice)
                pending.clear()

            for message in record["messages"]:
                if message.get("role") == "tool":
                    call_id = message.get("tool_call_id")
                    if call_id in pending:
                        pending.remove(call_id)
                    fixed.append(message)
                    continue
                close_block()
                fixed.append(message)
                if message.get("role") == "assistant":
                    pending.extend(
                        call["id"] for call in message.get("tool_calls") or [] if "id" in call
                    )
            close_block()
            if added:
                record["messages"] = fixed
                record["transcript"].extend(copy.deepcopy(added))
                self._write_session(session_id, record)
            return record["messages"]
