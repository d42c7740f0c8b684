"""What a session's tool calls did to the project's files, from its workspace marks: for
``--info ID --files`` (a path list per call, ``--diff`` for the diffs), ``--export ID
--files`` and ``--search PATH --files`` (the sessions whose calls changed a path); and the
workspace part of ``--doctor`` (sizes, the largest sessions; ``--repair`` collects now).

Read-only but for ``--doctor --repair``: nothing here writes the project.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, TextIO

from actors.core.config import Settings
from actors.core.errors import StorageError
from actors.store import Store, export_session, is_sqlite_url, open_store, to_markdown
from actors.workspace import ObjectStore, open_objects
from actors.workspace._calls import call_lines, calls_changing_files
from actors.workspace._diff import Trees, diff, unified
from actors.workspace._housekeeping import collect, report, size


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
            items = []
            trees = Trees(objects)
            for call in calls:
                item = call.as_json()
                if with_diff:
                    item["diff"] = "".join(
                        unified(trees, c) for c in diff(trees, call.before, call.mark.root)
                        if not c.is_dir)
                items.append(item)
            json.dump({"session_id": session_id, "calls": items}, out, ensure_ascii=False,
                      indent=2)
            out.write("\n")
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
        json.dump({**record, "files_changed": [c.as_json() for c in calls]}, out,
                  ensure_ascii=False, indent=2)
        out.write("\n")
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
        json.dump(sessions, out, ensure_ascii=False, indent=2)
        out.write("\n")
    elif not sessions:
        print(f"No session's tool calls changed {path}.", file=out)
    else:
        for item in sessions:
            calls = item["calls_changing_path"]
            print(f"{item['id']} | {item.get('title', '')} | {item['updated_at']} | "
                  f"{calls} call{'s' if calls != 1 else ''} changed {path}", file=out)
    return 0


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
                    print(f"Workspace snapshots collected: {done.sessions_gone} deleted "
                          f"session(s), {done.marks_expired} snapshot(s) older than "
                          f"{settings.snapshot_retention_days:g} days, "
                          f"{done.collected.deleted} objects "
                          f"({size(done.collected.freed_bytes)}).", file=out)
                for line in report(objects, store.exists).lines():
                    print(line, file=out)
            finally:
                objects.close()
    except StorageError as exc:
        print(f"Workspace snapshots: {exc}", file=out)
        return 1
    return 0
