"""Whole records into the store: :meth:`Importing.import_record` (what ``--import``, the
older JSON layout, a salvage and importers of other agents' transcripts go through), and
the bookkeeping of the older layout's files. Moving records in and out of files is
:mod:`actors.store._portability`'s.

One transaction per record; threads and cancellation as for every write
(:mod:`actors.store._writes`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from actors.core.messages import encode, to_plain
from actors.core.previews import latest_user_text, one_line, own_user_text
from actors.store import _indexer, _rows
from actors.store._branching import Branching
from actors.store._records import normalise_record
from actors.store._results import Compaction
from actors.store._text import session_text


class Importing(Branching):
    """Imports (see the module doc); :class:`~actors.store.Store` is built on them."""

    def import_record(self, record: Mapping[str, Any]) -> bool:
        """Insert a whole record (its own timestamps, transcript, context and compactions;
        missing fields get the notes' defaults) in one transaction.

        False, and nothing written, when a session with its id already exists. Raises
        :class:`InvalidRecord` for a record that cannot be one (every field checked first,
        numbers within what the store holds: :mod:`actors.store._hostile`).
        """
        checked = normalise_record(record, f"record {record.get('id')!r}")
        session_id = checked["id"]
        shared = self._shared
        with self.lease(session_id), shared.db.write(session_id) as conn:
            if _rows.exists(conn, session_id):
                return False
            typed = [t for m in checked["transcript"]
                     if (t := own_user_text(m)) is not None and t.strip()]
            latest = latest_user_text(checked["messages"]) or (typed[-1] if typed else "")
            rid = _rows.insert_record(conn, checked, typed=len(typed), preview=one_line(latest))
            transcript = [to_plain(m) for m in checked["transcript"]]
            texts = [encode(m) for m in transcript]
            mids = _rows.insert_messages(conn, rid, 0, transcript, texts, planned_calls=False)
            shared.index.mark_pending(conn, mids)
            context = [encode(to_plain(m)) for m in checked["messages"]]
            _rows.insert_context(conn, rid, context, dict(zip(texts, mids, strict=True)))
            compactions = [  # checked: integer token counts the store holds
                Compaction(at=str(c.get("at", "")), before_tokens=int(c.get("before_tokens", 0)),
                           after_tokens=int(c.get("after_tokens", 0)),
                           summary=str(c.get("summary", "")))
                for c in checked["compactions"]
            ]
            _rows.insert_compactions(conn, rid, 0, compactions)
            shared.index.set_session_text(conn, rid, session_text(
                checked["title"], checked["summary"], [c["summary"] for c in compactions]
            ))
        shared.contexts.forget(session_id)
        _indexer.index_now(shared)
        return True

    def legacy_files(self) -> dict[str, tuple[int, int]]:
        """Older JSON records already looked at: file name -> ``(size, mtime_ns)``."""
        with self._shared.db.read() as conn:
            return _rows.legacy_files(conn)

    def note_legacy_file(
        self, name: str, size: int, mtime_ns: int, session_id: str | None, error: str | None
    ) -> None:
        """Remember that an older JSON record was imported (or why it could not be)."""
        with self._shared.db.write() as conn:
            _rows.note_legacy_file(conn, name, size, mtime_ns, session_id, error)


__all__ = ["Importing"]
