"""The store's public face: outside ``actors/store`` the harness imports only the names
``actors.store`` exports (never one of its private modules), and everyone but the
checkpoint writer holds the read-only face, whose type has no method that writes."""

from __future__ import annotations

import ast
from pathlib import Path

import actors.store
from actors.store import SessionReader, Store

REPO = Path(__file__).resolve().parent.parent


def _private_store_imports(path: Path) -> list[str]:
    """``module: name`` of every import of a private part of ``actors.store`` in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [a.name for a in node.names]
            if node.module.startswith("actors.store."):
                parts = node.module.split(".")[2:]
                if any(p.startswith("_") for p in parts):
                    found.append(f"{node.lineno}: from {node.module} import …")
            elif node.module == "actors.store":
                found += [f"{node.lineno}: {n}" for n in names if n.startswith("_")]
        elif isinstance(node, ast.Import):
            found += [f"{node.lineno}: {a.name}" for a in node.names
                      if a.name.startswith("actors.store.")
                      and any(p.startswith("_") for p in a.name.split(".")[2:])]
    return found


def test_only_the_stores_public_names_are_imported_from_outside_it() -> None:
    outside = [p for folder in ("actors", "repl") for p in (REPO / folder).rglob("*.py")
               if (REPO / "actors" / "store") not in p.parents]
    offenders = {str(p.relative_to(REPO)): found for p in outside
                 if (found := _private_store_imports(p))}
    assert offenders == {}
    assert all(getattr(actors.store, name) for name in actors.store.__all__)


def test_the_read_only_face_has_no_method_that_writes() -> None:
    writes = {"create_session", "checkpoint", "append", "mark_started", "mark_process_group",
              "replace_context", "recover", "update", "propose_title", "ensure_summary",
              "delete", "remove_abandoned", "fork", "rewind", "import_record",
              "note_legacy_file", "lease", "index_pending", "catch_up_index"}
    assert writes <= set(dir(Store))  # the names are the store's writes ...
    public = {name for name in dir(SessionReader) if not name.startswith("_")}
    assert public & writes == set()  # ... and the reader has none of them
