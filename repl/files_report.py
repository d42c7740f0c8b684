"""What a session's tool calls did to the project's files, from its workspace marks: for
``--info ID --files`` (a path list per call, ``--diff`` for the diffs), ``--export ID
--files`` and ``--search PATH --files`` (the sessions whose calls changed a path); and the
workspace part of ``--doctor`` (sizes per project, the quota, the largest sessions;
``--repair`` collects now).

Read-only but for ``--doctor --repair``: nothing here writes the project.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from actors.core.config import Settings
from actors.core.errors import HarnessError, StorageError
from actors.store import Store, export_session, is_sqlite_url, open_store, to_markdown
from actors.workspace import (
    ObjectStore,
    call_lines,
    calls_changing_files,
    calls_json,
    collect,
    open_objects,
    quota_for,
    report,
)
from repl.interactive.sanitize import json_text
from repl.listing import ago


def _open(memory_dir: Path, store: Store) -> ObjectStore:
    return open_objects(memory_dir, store)


def show_files(store: Store, session_id: str, *, memory_dir: Path, with_diff: bool,
               as_json: bool, out: TextIO | None = None) -> int:
    """``--info ID --files [--diff]``."""
    out = out or sys.stdout
    session_id = store.info(session_id).id
    objects = _open(memory_dir, store)
    try:
        calls = calls_changing_files(objects, session_id)
        if as_json:
            items = calls_json(calls, objects if with_diff else None)
            out.write(json_text({"session_id": session_id, "calls": items}, indent=2) + "\n")
        else:
            print("\n".join(call_lines(calls, objects if with_diff else None)), file=out)
    finally:
        objects.close()
    return 0


def export_with_files(store: Store, session_id: str, *, memory_dir: Path, fmt: str,
                      out: TextIO | None = None) -> int:
    """``--export ID --files``: the export, with the files each tool call changed."""
    out = out or sys.stdout
    record = export_session(store, session_id)
    objects = _open(memory_dir, store)
    try:
        calls = calls_changing_files(objects, str(record["id"]))
    finally:
        objects.close()
    if fmt == "markdown":
        out.write(to_markdown(record))
        out.write("\n## Files changed by tool calls\n\n")
        for line in call_lines(calls)[1:] or ["none recorded."]:
            out.write(line + "\n")
    else:
        out.write(json_text({**record, "files_changed": [c.as_json() for c in calls]},
                            indent=2) + "\n")
    return 0


def search_path(store: Store, path: str, *, memory_dir: Path, as_json: bool,
                out: TextIO | None = None) -> int:
    """``--search PATH --files``: the sessions whose tool calls changed ``path`` (a file, or
    anything below a directory), most recently updated first."""
    out = out or sys.stdout
    objects = _open(memory_dir, store)
    try:
        found = objects.marks.sessions_changing(path)
    finally:
        objects.close()
    sessions: list[dict[str, Any]] = []
    for listed in store.list_sessions(include_archived=True):
        if listed["id"] in found:
            sessions.append({**listed, "calls_changing_path": found[listed["id"]]})
    if as_json:
        out.write(json_text(sessions, indent=2) + "\n")
    elif not sessions:
        print(f"No session's tool calls changed {path}.", file=out)
    else:
        for item in sessions:
            calls = item["calls_changing_path"]
            print(f"{item['id']} | {item.get('title', '')} | {ago(item['updated_at'])} | "
                  f"{calls} call{'s' if calls != 1 else ''} changed {path}", file=out)
    return 0


def _project_of(store: Store) -> Callable[[str], str]:
    def project_of(session_id: str) -> str:
        try:
            return store.info(session_id).project_root
        except HarnessError:
            return ""

    return project_of


def doctor_snapshots(settings: Settings, *, repair: bool, out: TextIO | None = None) -> int:
    """``--doctor``'s workspace lines; with ``--repair`` a collection first. 1 when the
    workspace store cannot be read."""
    out = out or sys.stdout
    objects_file = settings.memory_dir / "workspace" / "objects.sqlite3"
    if is_sqlite_url(settings.store_url) and not objects_file.exists():
        print("Workspace snapshots: none yet.", file=out)
        return 0
    try:
        with open_store(settings.memory_dir, settings.store_url) as store:
            objects = open_objects(settings.memory_dir, store)
            try:
                if repair:
                    done = collect(objects, store.exists,
                                   retention_days=settings.snapshot_retention_days)
                    print(done.line(settings.snapshot_retention_days), file=out)
                for line in report(objects, store.exists, _project_of(store),
                                   quota_for(settings.snapshot_quota_bytes, 0)).lines():
                    print(line, file=out)
            finally:
                objects.close()
    except StorageError as exc:
        print(f"Workspace snapshots: {exc}", file=out)
        return 1
    return 0
