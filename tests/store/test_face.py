"""The store's faces: everyone but the checkpoint writer holds the read-only one, whose type
has no method that writes (the imports of the store's private modules are tests/test_layout.py's
to check)."""

from __future__ import annotations

from pathlib import Path

import actors.store
from actors.store import SessionReader, SessionStore, Store


def test_the_read_only_face_has_no_method_that_writes(memory_dir: Path) -> None:
    writes = {"create_session", "checkpoint", "append", "mark_started", "mark_process_group",
              "replace_context", "recover", "update", "propose_title", "ensure_summary",
              "delete", "remove_abandoned", "fork", "rewind", "import_record",
              "note_legacy_file", "lease", "index_pending", "catch_up_index"}
    assert writes <= set(dir(Store))  # the names are the store's writes ...
    public = {name for name in dir(SessionReader) if not name.startswith("_")}
    assert public & writes == set()  # ... and the reader has none of them
    with SessionStore(memory_dir) as store:
        reader = store.reader
        assert type(reader) is SessionReader  # the object handed out, not the store itself
        sid = store.create_session(messages=[{"role": "system", "content": "s"}])
        assert [s["id"] for s in reader.list_sessions()] == [sid]


def test_every_public_name_of_the_store_is_there() -> None:
    assert all(getattr(actors.store, name) for name in actors.store.__all__)
