"""Moving sessions in and out of a store: export, import, and the older JSON layout.

Functions over the store's public API (:class:`Records` is the part of it they use), so they
work on either backend and know nothing of its tables: a record goes in whole through
``import_record`` (one transaction) and comes out through ``load_session``. Synchronous like
the store; file errors become :class:`InvalidRecord` naming the file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from actors.core.errors import InvalidRecord, StorageError, UsageError
from actors.store._records import FORMAT_VERSION, ExportedRecord, SessionRecord, read_record_file
from actors.store._results import ImportResult


class Records(Protocol):
    """What export and import need of a store."""

    @property
    def sessions_dir(self) -> Path: ...

    @property
    def import_warnings(self) -> list[str]: ...

    def load_session(self, session_id: str) -> SessionRecord: ...

    def import_record(self, record: Mapping[str, Any]) -> bool: ...

    def legacy_files(self) -> dict[str, tuple[int, int]]: ...

    def note_legacy_file(
        self, name: str, size: int, mtime_ns: int, session_id: str | None, error: str | None
    ) -> None: ...


# What storing a checked record could still raise on a value the checks let through (a
# database's own limits): reported for its file, never a traceback for another command.
_UNCHECKED = (ValueError, TypeError, OverflowError)


def _unstorable(exc: Exception) -> str:
    return f"cannot be stored ({type(exc).__name__}: {exc})"


def export_session(store: Records, session_id: str) -> ExportedRecord:
    """The session's record as portable JSON data (``format_version`` first)."""
    return ExportedRecord(format_version=FORMAT_VERSION,
                          **store.load_session(session_id))


def import_paths(store: Records, *paths: str | os.PathLike[str]) -> list[ImportResult]:
    """Import exported files, older JSON records, and directories of them.

    A record whose id already exists is skipped (importing is idempotent); a malformed
    one is reported by name and skipped; the rest are imported, each in one transaction.
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
                skipped = not store.import_record(record)
                results.append(ImportResult(str(file), record["id"], skipped=skipped))
            except (InvalidRecord, StorageError, UsageError) as exc:
                results.append(ImportResult(str(file), error=str(exc)))
            except _UNCHECKED as exc:  # a value the checks let through: the next file
                results.append(ImportResult(str(file), error=f"{file}: {_unstorable(exc)}"))
    return results


def import_legacy_dir(store: Records) -> None:
    """Import ``sessions/*.json`` of the older layout, each file once until it changes;
    never modify them. A malformed file is reported once in ``store.import_warnings`` (one
    line naming the file and the field) and never stops the command that opened the store;
    one whose lease is held (an older harness still runs it), or that cannot be written now
    (a full disk, a read-only store), is tried again on the next open."""
    try:
        entries = [e for e in os.scandir(store.sessions_dir) if e.name.endswith(".json")]
    except OSError:
        return
    if not entries:
        return
    try:
        known = store.legacy_files()
    except StorageError as exc:
        store.import_warnings.append(f"Older session files not imported now: {exc}")
        return
    for entry in sorted(entries, key=lambda e: e.name):
        try:
            stat = entry.stat()
        except OSError:
            continue
        if known.get(entry.name) == (stat.st_size, stat.st_mtime_ns):
            continue
        session_id, error = None, None
        try:
            record = read_record_file(Path(entry.path))
            store.import_record(record)
            session_id = record["id"]
        except InvalidRecord as exc:
            error = str(exc)
            store.import_warnings.append(f"Skipped legacy session file {error}")
        except _UNCHECKED as exc:  # never stops the command that opened the store
            error = f"{entry.path}: {_unstorable(exc)}"
            store.import_warnings.append(f"Skipped legacy session file {error}")
        except UsageError:  # its lease is held: an older harness still runs it; next time
            continue
        except StorageError as exc:  # not written now; tried again on the next open
            store.import_warnings.append(f"Legacy session file {entry.path} not imported "
                                         f"now: {exc}")
            continue
        try:
            store.note_legacy_file(entry.name, stat.st_size, stat.st_mtime_ns, session_id,
                                   error)
        except StorageError as exc:
            store.import_warnings.append(f"Legacy session file {entry.path}: {exc}")
