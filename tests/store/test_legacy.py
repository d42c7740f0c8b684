"""Older JSON records: automatic import from <memory-dir>/sessions/*.json, --import, defaults
(on both backends: the PostgreSQL store imports them from the memory dir too)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from actors.store import import_paths
from tests.support.stores import Stores


def legacy_record(session_id: str, text: str) -> dict[str, Any]:
    """A record as the notes' first store wrote it: no transcript, title, state..."""
    return {
        "id": session_id,
        "created_at": "2026-10-12T10:20:00+00:00",
        "updated_at": "2026-10-12T10:24:51+00:00",
        "summary": f"Investigated {text}.",
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": f"Investigate {text}"},
        ],
    }


def test_legacy_directory_is_imported_once_and_never_modified(
    stores: Stores, memory_dir: Path
) -> None:
    sessions = memory_dir / "sessions"
    sessions.mkdir(parents=True)
    good = sessions / "z7Pq3hM4kA.json"
    good.write_text(json.dumps(legacy_record("z7Pq3hM4kA", "the cache bug"), indent=2))
    bad = sessions / "broken.json"
    bad.write_text("{ not json")
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in (good, bad)}

    store = stores.open(memory_dir)
    assert [s["id"] for s in store.list_sessions()] == ["z7Pq3hM4kA"]
    [warning] = store.import_warnings
    assert "broken.json" in warning
    record = store.load_session("z7Pq3hM4kA")
    assert record["transcript"] == record["messages"]
    assert (record["title"], record["archived"], record["state"], record["compactions"]) == (
        "", False, {}, []
    )
    assert record["status"] == "saved"
    assert [r["id"] for r in store.search_sessions("cache bug")] == ["z7Pq3hM4kA"]
    store.update("z7Pq3hM4kA", title="renamed in the new store")
    store.close()

    again = stores.open(memory_dir)  # idempotent: no duplicate, no overwrite of the rename
    assert [s["id"] for s in again.list_sessions()] == ["z7Pq3hM4kA"]
    assert again.info("z7Pq3hM4kA").title == "renamed in the new store"
    assert again.import_warnings == []  # a malformed file is reported once, until it changes
    after = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in (good, bad)}
    assert after == before


def test_import_files_and_directories_reports_malformed_by_name(
    stores: Stores, memory_dir: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "exports"
    folder.mkdir()
    (folder / "a.json").write_text(json.dumps(legacy_record("sessionA", "alpha")))
    (folder / "b.json").write_text(json.dumps(legacy_record("sessionB", "beta")))
    (folder / "c.json").write_text(json.dumps({"id": "../evil", "messages": []}))
    (folder / "d.json").write_text(json.dumps({"id": "noMessages"}))
    single = tmp_path / "single.json"
    single.write_text(json.dumps(legacy_record("sessionC", "gamma")))
    store = stores.open(memory_dir)
    results = import_paths(store, folder, single, tmp_path / "missing.json")
    imported = sorted(r.session_id for r in results if r.session_id and not r.error)
    assert imported == ["sessionA", "sessionB", "sessionC"]
    errors = [r.error for r in results if r.error]
    assert len(errors) == 3
    assert any("c.json" in e and "id" in e for e in errors)
    assert any("d.json" in e and "messages" in e for e in errors)
    assert any("missing.json" in e for e in errors)


def test_import_keeps_compacted_context_and_transcript_apart(
    stores: Stores, memory_dir: Path, tmp_path: Path
) -> None:
    summary = {"role": "user", "content": "<session_context_data>s</session_context_data>"}
    record = legacy_record("compacted", "delta")
    record["transcript"] = [*record["messages"], {"role": "assistant", "content": "old"}]
    record["messages"] = [record["messages"][0], summary]
    record["compactions"] = [{"at": "t", "before_tokens": 9, "after_tokens": 3, "summary": "s"}]
    path = tmp_path / "r.json"
    path.write_text(json.dumps(record))
    store = stores.open(memory_dir)
    import_paths(store, path)
    loaded = store.load_session("compacted")
    assert loaded["messages"] == record["messages"]
    assert loaded["transcript"] == record["transcript"]
    assert loaded["compactions"] == record["compactions"]
