"""The object store: blobs and trees by oid, on SQLite (a file of its own) or PostgreSQL
(tables beside the sessions), with the collection of what no snapshot needs.

Shared SQL over a ``read()``/``write()`` transactions object, as the session store does
(``?`` placeholders; the PostgreSQL connection adapts them in one place). Objects are
zlib-compressed when that saves space (codec 1); a changed file's new content given with its
previous version's oid is kept as a delta against that version's whole content when that is
smaller (codec 2, :mod:`._delta`; its ``base`` column names the object it is a delta of,
which is always stored whole: reading one costs two objects, never a chain). Every object
has ``used_at``: when a snapshot last produced or reused it. The bytes stored in all are
counted in ``workspace_meta`` (``stored_bytes``), so the quota (:mod:`._housekeeping`) costs
no scan.

Collection (:meth:`ObjectStore.collect`) keeps what the given roots (the snapshots recorded
in sessions) reach, and whatever was used within the grace period together with what it
reaches (a snapshot just taken whose id is not recorded yet); what is kept reaches the bases
of its deltas too. Because a snapshot's stat cache
names blobs without reading them, a collection that deleted anything moves the store's
*epoch*; :meth:`ObjectStore.save` is given the epoch its snapshot started from and writes
nothing when it moved (the snapshot is then taken again without the cache). Both run in one
write transaction that locks the epoch (SQLite's write lock; a row lock on PostgreSQL), so
either the collection sees the snapshot's objects as just used, or the snapshot sees the new
epoch.

Synchronous and thread-safe (the transactions hold their connection's lock). Nothing is
cancellable: a call that has started runs to its end in its thread.
"""

from __future__ import annotations

import time
import uuid
import zlib
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from actors.core.errors import StorageError
from actors.store import Conn
from actors.workspace import _delta
from actors.workspace._database import Database
from actors.workspace._marks import SCHEMA as MARKS_SCHEMA
from actors.workspace._marks import Marks
from actors.workspace._tree import BLOB, TREE, decode_tree

COMPRESS_LEVEL = 6
DELTA_AT_MOST = 0.5  # a delta larger than this share of the whole (compressed) is not kept
_CHUNK = 400  # ids in one IN (...) list
RAW, ZLIB, DELTA = 0, 1, 2  # codecs

_SQLITE_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS workspace_objects ("
    " id BLOB PRIMARY KEY, kind INTEGER NOT NULL, size INTEGER NOT NULL,"
    " stored INTEGER NOT NULL, codec INTEGER NOT NULL, used_at INTEGER NOT NULL,"
    " data BLOB NOT NULL, base BLOB)",
    "CREATE TABLE IF NOT EXISTS workspace_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
)
_PG_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS workspace_objects ("
    " id BYTEA PRIMARY KEY, kind SMALLINT NOT NULL, size BIGINT NOT NULL,"
    " stored BIGINT NOT NULL, codec SMALLINT NOT NULL, used_at BIGINT NOT NULL,"
    " data BYTEA NOT NULL, base BYTEA)",
    "CREATE TABLE IF NOT EXISTS workspace_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "ALTER TABLE workspace_objects ADD COLUMN IF NOT EXISTS base BYTEA",
)
_META_DEFAULTS = (
    "INSERT INTO workspace_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING"
)



class PgObjects:
    """PostgreSQL transactions (on a connection of the objects' own, to the session store's
    database and schema) as a :class:`Database` for objects."""

    dialect = "postgres"

    def __init__(self, db: Any) -> None:
        self._db = db

    @property
    def location(self) -> str:
        return str(self._db.location)

    def read(self) -> AbstractContextManager[Conn]:
        result: AbstractContextManager[Conn] = self._db.read()
        return result

    def write(self, *, durable: bool = False) -> AbstractContextManager[Conn]:
        """Every PostgreSQL commit is durable."""
        result: AbstractContextManager[Conn] = self._db.write()
        return result

    def close(self) -> None:
        self._db.close()


@dataclass(frozen=True)
class Collected:
    """What a collection did."""

    deleted: int
    freed_bytes: int  # stored (compressed) bytes of the deleted objects
    kept: int


@dataclass(frozen=True)
class Usage:
    objects: int
    size: int  # bytes of content
    stored: int  # bytes as stored (compressed)


def _chunks(items: Sequence[bytes]) -> Iterator[Sequence[bytes]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]


def _marks(n: int) -> str:
    return ", ".join("?" * n)


def pack(data: bytes) -> tuple[int, bytes]:
    """``(codec, stored)``: zlib when it saves space, else the bytes as they are."""
    if len(data) > 64:
        packed = zlib.compress(data, COMPRESS_LEVEL)
        if len(packed) < len(data):
            return ZLIB, packed
    return RAW, data


def unpack(codec: int, data: bytes) -> bytes:
    return zlib.decompress(data) if codec == ZLIB else bytes(data)


_Row = tuple[bytes, int, int, int, int, int, bytes, bytes | None]


def _whole_row(row: _Row, content: bytes) -> _Row:
    codec, stored = pack(content)
    return (row[0], row[1], row[2], len(stored), codec, row[5], stored, None)


def _sum_stored(conn: Conn) -> int:
    row = conn.execute("SELECT coalesce(sum(stored), 0) FROM workspace_objects").fetchone()
    return int(row[0])


def _add_base_column(conn: Conn) -> None:
    """A file made before deltas has no ``base`` column (SQLite: no ADD COLUMN IF NOT
    EXISTS)."""
    columns = {str(r[1]) for r in conn.execute("PRAGMA table_info(workspace_objects)")}
    if "base" not in columns:
        conn.execute("ALTER TABLE workspace_objects ADD COLUMN base BLOB")


class ObjectStore:
    """Blobs and trees of every snapshot (see the module doc)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        schema = _SQLITE_SCHEMA if db.dialect == "sqlite" else _PG_SCHEMA
        for attempt in range(2):
            try:
                with db.write() as conn:
                    for statement in (*schema, *MARKS_SCHEMA[db.dialect]):
                        conn.execute(statement)
                    if db.dialect == "sqlite":
                        _add_base_column(conn)
                    conn.execute(_META_DEFAULTS, ("store_id", uuid.uuid4().hex))
                    conn.execute(_META_DEFAULTS, ("gc_epoch", "0"))
                    if conn.execute("SELECT 1 FROM workspace_meta WHERE key = 'stored_bytes'"
                                    ).fetchone() is None:  # counted once, then kept
                        conn.execute(_META_DEFAULTS, ("stored_bytes", str(_sum_stored(conn))))
                break
            except StorageError:  # two processes creating the tables at once (PostgreSQL)
                if attempt:
                    raise
        with db.read() as conn:
            row = conn.execute(
                "SELECT value FROM workspace_meta WHERE key = 'store_id'"
            ).fetchone()
        self.identity = str(row[0])
        self.marks = Marks(db)

    @property
    def location(self) -> str:
        return self.db.location

    def close(self) -> None:
        """Close the objects' own database (tables in the session store's: nothing)."""
        close = getattr(self.db, "close", None)
        if close is not None:
            close()

    def epoch(self) -> int:
        with self.db.read() as conn:
            return self._epoch(conn)

    @staticmethod
    def _epoch(conn: Conn, lock: str = "") -> int:
        row = conn.execute(
            f"SELECT value FROM workspace_meta WHERE key = 'gc_epoch'{lock}"
        ).fetchone()
        return int(row[0]) if row else 0

    def _lock(self) -> str:
        return " FOR UPDATE" if self.db.dialect == "postgres" else ""

    def missing(self, oids: Iterable[bytes]) -> set[bytes]:
        """The oids among ``oids`` that are not stored."""
        wanted = list(dict.fromkeys(oids))
        found: set[bytes] = set()
        if not wanted:
            return found
        with self.db.read() as conn:
            for chunk in _chunks(wanted):
                rows = conn.execute(
                    f"SELECT id FROM workspace_objects WHERE id IN ({_marks(len(chunk))})",
                    tuple(chunk),
                ).fetchall()
                found.update(bytes(r[0]) for r in rows)
        return set(wanted) - found

    def save(
        self,
        objects: dict[bytes, tuple[int, bytes]],
        *,
        touch: Sequence[bytes] = (),
        epoch: int | None = None,
        bases: dict[bytes, bytes] | None = None,
    ) -> int | None:
        """Store ``objects`` (oid -> (kind, content)) and mark ``touch`` as just used, in one
        transaction, and return the store's epoch; None, with nothing written, when the
        epoch is no longer ``epoch``. ``bases``: oid -> the oid of an earlier version of the
        same file, which the new one may be kept as a delta of (see the module doc)."""
        now = int(time.time())
        whole = self._whole_bases(bases) if bases else {}
        rows: list[_Row] = []
        for oid, (kind, content) in objects.items():
            codec, stored = pack(content)
            base: bytes | None = None
            found = whole.get(bases.get(oid, b"")) if bases else None
            if found is not None and _delta.similar(content, found[1]):
                delta = _delta.encode(content, found[1])
                if len(delta) < len(stored) * DELTA_AT_MOST:
                    codec, stored, base = DELTA, delta, found[0]
            rows.append((oid, kind, len(content), len(stored), codec, now, stored, base))
        with self.db.write() as conn:
            current = self._epoch(conn, self._share())
            if epoch is not None and current != epoch:
                return None
            if rows:
                wanted = {row[7] for row in rows if row[7] is not None}
                if wanted:  # a base collected since it was read: that content goes whole
                    kept = self._present(conn, wanted)
                    rows = [row if row[7] is None or row[7] in kept
                            else _whole_row(row, objects[row[0]][1]) for row in rows]
                conn.executemany(
                    "INSERT INTO workspace_objects"
                    " (id, kind, size, stored, codec, used_at, data, base)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT (id) DO UPDATE SET used_at = excluded.used_at",
                    rows,
                )
                self._count_stored(conn, sum(row[3] for row in rows))
            touched = [oid for oid in dict.fromkeys(touch) if oid not in objects]
            for chunk in _chunks(touched):
                conn.execute(
                    f"UPDATE workspace_objects SET used_at = ? WHERE id IN ({_marks(len(chunk))})",
                    (now, *chunk),
                )
        return current

    def _share(self) -> str:
        return " FOR SHARE" if self.db.dialect == "postgres" else ""

    @staticmethod
    def _present(conn: Conn, oids: set[bytes]) -> set[bytes]:
        found: set[bytes] = set()
        for chunk in _chunks(list(oids)):
            found.update(bytes(r[0]) for r in conn.execute(
                f"SELECT id FROM workspace_objects WHERE id IN ({_marks(len(chunk))})",
                tuple(chunk)).fetchall())
        return found

    def _count_stored(self, conn: Conn, added: int) -> None:
        """Add ``added`` to the bytes stored (a row lock on PostgreSQL: two processes'
        snapshots add one after the other)."""
        row = conn.execute("SELECT value FROM workspace_meta WHERE key = 'stored_bytes'"
                           f"{self._lock()}").fetchone()
        total = int(row[0]) if row else 0
        conn.execute(
            "INSERT INTO workspace_meta (key, value) VALUES ('stored_bytes', ?)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value", (str(total + added),))

    def stored_bytes(self) -> int:
        """The bytes the objects take as stored (kept as they are written and collected)."""
        value = self.meta("stored_bytes")
        return int(value) if value else 0

    def _rows(self, conn: Conn, oids: Sequence[bytes]) -> dict[bytes, tuple[int, bytes,
                                                                             bytes | None]]:
        found: dict[bytes, tuple[int, bytes, bytes | None]] = {}
        for chunk in _chunks(oids):
            for oid, codec, data, base in conn.execute(
                f"SELECT id, codec, data, base FROM workspace_objects WHERE id IN "
                f"({_marks(len(chunk))})", tuple(chunk),
            ).fetchall():
                found[bytes(oid)] = (int(codec), bytes(data),
                                     bytes(base) if base is not None else None)
        return found

    def _contents(self, conn: Conn, oids: Iterable[bytes]) -> dict[bytes, bytes]:
        """The contents of the stored ones among ``oids`` (deltas read with their bases)."""
        rows = self._rows(conn, list(dict.fromkeys(oids)))
        bases = {base for codec, _data, base in rows.values() if base is not None}
        missing = [b for b in bases if b not in rows]
        if missing:
            rows.update(self._rows(conn, missing))
        found: dict[bytes, bytes] = {}
        for oid, (codec, data, _base) in rows.items():
            if codec != DELTA:
                found[oid] = unpack(codec, data)
        for oid, (codec, data, base) in rows.items():
            if codec == DELTA:
                if base is None or base not in found:
                    raise StorageError(
                        f"The workspace snapshot object {oid.hex()[:12]} is a change to an "
                        f"object that is missing ({self.location}); it cannot be read.")
                found[oid] = _delta.decode(data, found[base])
        return found

    def _whole_bases(self, bases: dict[bytes, bytes]) -> dict[bytes, tuple[bytes, bytes]]:
        """``earlier version -> (the whole object it is or is a delta of, its content)`` of
        the stored ones among ``bases``' values."""
        with self.db.read() as conn:
            rows = self._rows(conn, list(set(bases.values())))
            of = {oid: base if codec == DELTA and base is not None else oid
                  for oid, (codec, _data, base) in rows.items()}
            contents = self._contents(conn, set(of.values()))
        return {oid: (whole, contents[whole]) for oid, whole in of.items() if whole in contents}

    def load(self, oid: bytes) -> bytes:
        """The content of ``oid``; :class:`StorageError` when it is not stored."""
        found = self.load_many([oid])
        if oid not in found:
            raise StorageError(
                f"The workspace snapshot object {oid.hex()[:12]} is missing "
                f"({self.location}); that snapshot cannot be read."
            )
        return found[oid]

    def load_many(self, oids: Iterable[bytes]) -> dict[bytes, bytes]:
        """The contents of the stored ones among ``oids``."""
        wanted = list(dict.fromkeys(oids))
        if not wanted:
            return {}
        with self.db.read() as conn:
            found = self._contents(conn, wanted)
        return {oid: found[oid] for oid in wanted if oid in found}

    def meta(self, key: str) -> str | None:
        with self.db.read() as conn:
            row = conn.execute("SELECT value FROM workspace_meta WHERE key = ?",
                               (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        with self.db.write() as conn:
            conn.execute(
                "INSERT INTO workspace_meta (key, value) VALUES (?, ?)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    def stored_sizes(self, oids: Iterable[bytes]) -> dict[bytes, int]:
        """``oid -> bytes as stored`` of the stored ones among ``oids``."""
        wanted = list(oids)
        found: dict[bytes, int] = {}
        with self.db.read() as conn:
            for chunk in _chunks(wanted):
                for oid, stored in conn.execute(
                    f"SELECT id, stored FROM workspace_objects WHERE id IN "
                    f"({_marks(len(chunk))})", tuple(chunk),
                ).fetchall():
                    found[bytes(oid)] = int(stored)
        return found

    def usage(self) -> Usage:
        with self.db.read() as conn:
            row = conn.execute(
                "SELECT count(*), coalesce(sum(size), 0), coalesce(sum(stored), 0) "
                "FROM workspace_objects"
            ).fetchone()
        return Usage(int(row[0]), int(row[1]), int(row[2]))

    def reachable(self, roots: Iterable[bytes], conn: Conn | None = None) -> set[bytes]:
        """Every oid the trees ``roots`` reach (the roots included, where stored), and the
        bases of the deltas among them."""
        if conn is None:
            with self.db.read() as own:
                return self.reachable(roots, own)
        seen: set[bytes] = set()
        pending = [r for r in dict.fromkeys(roots)]
        while pending:
            batch = pending[:_CHUNK]
            del pending[:_CHUNK]
            batch = [oid for oid in batch if oid not in seen]
            if not batch:
                continue
            seen.update(batch)
            rows = self._trees(batch, conn)
            for data in rows:
                for entry in decode_tree(data):
                    if entry.kind == "d":
                        if entry.oid not in seen:
                            pending.append(entry.oid)
                    elif entry.is_content:
                        seen.add(entry.oid)
        for chunk in _chunks(list(seen)):  # a delta reaches its base (never a delta)
            seen.update(bytes(r[0]) for r in conn.execute(
                f"SELECT base FROM workspace_objects WHERE base IS NOT NULL AND id IN "
                f"({_marks(len(chunk))})", tuple(chunk)).fetchall())
        return seen

    def _trees(self, oids: Sequence[bytes], conn: Conn) -> list[bytes]:
        rows = conn.execute(
            f"SELECT codec, data FROM workspace_objects WHERE kind = {TREE} AND id IN "
            f"({_marks(len(oids))})", tuple(oids)).fetchall()
        return [unpack(int(codec), bytes(data)) for codec, data in rows]

    def collect(self, roots: Iterable[bytes], *, grace_seconds: float) -> Collected:
        """Delete every object that neither ``roots`` nor an object used within the grace
        period reaches (see the module doc)."""
        cutoff = int(time.time() - grace_seconds)
        roots = list(roots)
        with self.db.write() as conn:
            epoch = self._epoch(conn, self._lock())
            old = {
                bytes(oid): int(stored)
                for oid, stored in conn.execute(
                    "SELECT id, stored FROM workspace_objects WHERE used_at < ?", (cutoff,)
                ).fetchall()
            }
            if not old:
                return Collected(0, 0, self._count(conn))
            recent = [
                bytes(r[0]) for r in conn.execute(
                    f"SELECT id FROM workspace_objects WHERE kind = {TREE} AND used_at >= ?",
                    (cutoff,),
                ).fetchall()
            ]
            live = self.reachable([*roots, *recent], conn)
            dead = [oid for oid in old if oid not in live]
            for chunk in _chunks(dead):
                conn.execute(
                    f"DELETE FROM workspace_objects WHERE id IN ({_marks(len(chunk))})",
                    tuple(chunk),
                )
            if dead:
                conn.execute(
                    "UPDATE workspace_meta SET value = ? WHERE key = 'gc_epoch'",
                    (str(epoch + 1),),
                )
                conn.execute("UPDATE workspace_meta SET value = ? WHERE key = 'stored_bytes'",
                             (str(_sum_stored(conn)),))
            kept = self._count(conn)
        return Collected(len(dead), sum(old[oid] for oid in dead), kept)

    @staticmethod
    def _count(conn: Conn) -> int:
        return int(conn.execute("SELECT count(*) FROM workspace_objects").fetchone()[0])


__all__ = ["BLOB", "TREE", "Collected", "ObjectStore", "PgObjects", "Usage"]
