"""The checkpoint journal: an append is one row; the tables follow (SQLite, docs/storage.md).

A checkpoint that appends to a session (:meth:`~actors.store._store.Store.append`) commits
one row of ``journal``: the messages it adds, encoded as they are stored, the state, and the
session's counters it was made against. That row is the durable checkpoint: one small insert
and one ``fdatasync``, whatever the schema behind it. The normalised tables (transcript,
context, write-ahead records, the session row and its listing columns) follow in a
transaction of their own, *applying* the entry, which deletes the row in the same
transaction:

* by the store instance that wrote it, right after (the checkpoint writer calls
  :meth:`~actors.store._store.Store.apply_journal` between writes), synced on its own, so the
  next checkpoint's ``fdatasync`` carries only its own row;
* before any other transaction of that store instance (the database's settle hook), so
  every read and every other write sees every checkpoint;
* by any store instance, of any process, that finds an entry in the table when it begins a
  transaction (its writer was killed between the two commits). An entry carries everything
  it needs, and applying it first checks, inside the transaction, that the row is still
  there and the session's counters are still those it was made against: each entry is
  applied once, in order, whoever gets there first.

The row's text: a header line (JSON: the session, the counters, the flags, the time), the
state line (the state's stored JSON; empty for none), then one line per message, its stored
JSON (compact JSON never holds a raw newline). Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from json.encoder import encode_basestring_ascii

from actors.core.errors import CorruptSession
from actors.core.messages import Message
from actors.store._rows import AppendRow


@dataclass(slots=True)
class Entry:
    """One journaled append: what it adds to session ``session_id`` (row ``before.rid``),
    made against the counters of ``before``."""

    jid: int
    session_id: str
    before: AppendRow
    plain: list[Message]  # the messages, as dicts
    texts: list[str]  # their stored JSON
    state: str | None  # the state's stored JSON, if the append gave one
    status: str | None
    planned_calls: bool
    at: float  # when it was committed (seconds since the epoch)

    @property
    def updated_at(self) -> str:
        """:attr:`at` as the session row keeps it (ISO 8601 UTC, microseconds)."""
        return datetime.fromtimestamp(self.at, UTC).isoformat(timespec="microseconds")


def _text(value: str | None) -> str:
    return "null" if value is None else encode_basestring_ascii(value)


def encode(session_id: str, before: AppendRow, texts: Sequence[str], state: str | None,
           status: str | None, planned_calls: bool, at: float) -> str:
    """The row text of an entry (its jid is the row's). The header is a JSON array written
    field by field: every checkpoint pays for it, and ``json.dumps`` costs several times as
    much for a dozen plain values."""
    b = before
    branch = "null" if b.branch_seq is None else str(b.branch_seq)
    header = (f"[{_text(session_id)},{b.rid},{b.context_version},{b.context_len},"
              f"{b.transcript_len},{branch},{_text(b.title_source)},{b.user_messages},"
              f"{_text(b.status)},{_text(status)},{'true' if planned_calls else 'false'},"
              f"{at!r}]")
    return "\n".join([header, state or "", *texts])


def decode(jid: int, text: str) -> Entry:
    """The entry a row holds (one left by a process that did not apply it); its messages
    parsed. Raises :class:`CorruptSession` for a row that is not one."""
    try:
        header, state, *texts = text.split("\n")
        fields = json.loads(header)
        session_id, *counters, status, planned_calls, at = fields
        before = AppendRow._make(counters)
        plain = [json.loads(body) for body in texts]
    except (TypeError, ValueError) as exc:
        raise CorruptSession("(journal)", f"checkpoint journal row {jid} cannot be read "
                             f"({exc}); run `harness --doctor`") from None
    return Entry(jid, str(session_id), before, plain, texts, state or None, status,
                 bool(planned_calls), float(at))


__all__ = ["Entry", "decode", "encode"]
