"""Moving sessions in and out of a store: export, import, and the older JSON layout.

A mixin of :class:`actors.store._base.Store` (it uses the store's transactions, lease and
message insertion); one idea, kept apart from the store's core. Synchronous like the store.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from actors.core.errors import InvalidRecord, StorageError, UsageError
from actors.core.messages import encode, to_plain
from actors.store._records import (
    FORMAT_VERSION,
    ImportResult,
    normalise_record,
    read_record_file,
)
from actors.store._search import session_text

if TYPE_CHECKING:
    from actors.store._base import Store


class Portability:
    def export(self: Store, session_id: str) -> dict[str, Any]:
        """The record as portable JSON data (``format_version`` first)."""
        return {"format_version": FORMAT_VERSION, **self.load_session(session_id)}

    def import_(self: Store, *paths: str | os.PathLike[str]) -> list[ImportResult]:
        """Import exported files, older JSON records, and directories of them.

        A record whose id already exists is skipped (importing is idempotent); a malformed
        one is reported by name and skipped; the rest are imported.
        """
        results = []
        for raw in paths:
            path = Path(raw).expanduser()
            if path.is_dir():
                files = sorted(path.glob("*.json"))
                if not files:
                    results.append(ImportResult(str(path), error=f"{path}: no *.json files"))
            elif path.exists():
                files = [path]
            else:
                results.append(ImportResult(str(path), error=f"{path}: no such file"))
                continue
            for file in files:
                try:
                    record = read_record_file(file)
                    skipped = not self.import_record(record)
                    results.append(ImportResult(str(file), record["id"], skipped=skipped))
                except (InvalidRecord, StorageError, UsageError) as exc:
                    results.append(ImportResult(str(file), error=str(exc)))
        return results

    def import_record(self: Store, record: dict[str, Any]) -> bool:
        """Insert a normalised record; False when a session with its id already exists."""
        record = normalise_record(record, f"record {record.get('id')!r}")
        session_id = record["id"]
        with self.lease(session_id), self._write(session_id) as conn:
            if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone():
                return False
            conn.execute(
                "INSERT INTO sessions (id, created_at, updated_at, title, summary, archived,"
                " status, project_root, parent_id, state, context_len, transcript_len)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    session_id, record["created_at"], record["updated_at"], record["title"],
                    record["summary"], int(record["archived"]),
                    "saved" if record["status"] == "active" else record["status"],
                    record["project_root"], record["parent_id"],
                    json.dumps(record["state"], ensure_ascii=False, sort_keys=True),
                    len(record["messages"]), len(record["transcript"]),
                ),
            )
            rid = self._row(conn, session_id)["rid"]
            transcript = [to_plain(m) for m in record["transcript"]]
            texts = [encode(m) for m in transcript]
            mids = self._insert_messages(conn, rid, 0, None, transcript, texts,
                                         planned_calls=False)
            by_text = dict(zip(texts, mids, strict=True))
            context = [encode(to_plain(m)) for m in record["messages"]]
            if context:
                conn.executemany(
                    "INSERT INTO context (session_rid, pos, mid, body) VALUES (?, ?, ?, ?)",
                    [
                        (rid, pos, by_text.get(text), None if text in by_text else text)
                        for pos, text in enumerate(context)
                    ],
                )
            compactions = [c for c in record["compactions"] if isinstance(c, dict)]
            if compactions:
                conn.executemany(
                    "INSERT INTO compactions (session_rid, n, at, before_tokens, after_tokens,"
                    " summary) VALUES (?, ?, ?, ?, ?, ?)",
                    [
                        (rid, n, str(c.get("at", "")), int(c.get("before_tokens", 0)),
                         int(c.get("after_tokens", 0)), str(c.get("summary", "")))
                        for n, c in enumerate(compactions)
                    ],
                )
            self._index_session_text(conn, rid, session_text(
                record["title"], record["summary"],
                [str(c.get("summary", "")) for c in compactions],
            ))
        return True

    def _import_legacy_dir(self: Store) -> None:
        """Import ``sessions/*.json`` of the older layout once each; never modify them."""
        try:
            entries = [e for e in os.scandir(self.sessions_dir) if e.name.endswith(".json")]
        except OSError:
            return
        if not entries:
            return
        with self._read() as conn:
            known = {
                name: (size, mtime)
                for name, size, mtime in conn.execute(
                    "SELECT name, size, mtime_ns FROM legacy_files"
                )
            }
        for entry in entries:
            try:
                stat = entry.stat()
            except OSError:
                continue
            if known.get(entry.name) == (stat.st_size, stat.st_mtime_ns):
                continue
            session_id, error = None, None
            try:
                record = read_record_file(Path(entry.path))
                self.import_record(record)
                session_id = record["id"]
            except InvalidRecord as exc:
                error = str(exc)
                self.import_warnings.append(f"Skipped legacy session file {error}")
            except UsageError:  # its lease is held: an older harness still runs it; next time
                continue
            with self._write() as conn:
                conn.execute(
                    "INSERT INTO legacy_files (name, size, mtime_ns, session_id, error)"
                    " VALUES (?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET"
                    " size = excluded.size, mtime_ns = excluded.mtime_ns,"
                    " session_id = excluded.session_id, error = excluded.error",
                    (entry.name, stat.st_size, stat.st_mtime_ns, session_id, error),
                )

