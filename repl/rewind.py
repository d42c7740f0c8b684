"""``harness --rewind ID --to N --files [--dry-run] [--json]``: the project's files back to what
they were when user message N was sent, without a model; ``--rewind ID --undo`` undoes the
last one.

The session's lease is held for the whole command (a harness running that session refuses
it, and the other way round), and an interrupted rewind is finished or undone first. What
would change is printed before anything is written (a diffstat, hand edits flagged: files
changed since the session last looked, which the rewind would overwrite); with
``--dry-run`` that is all. The files restored are kept first, so ``--undo`` brings them back.
Exit status: 0 done (or nothing to do), 1 the files could not be restored (the message says
whether they were put back), 2 a user mistake (no such session or message, locked).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, TextIO

from actors.store import Store
from actors.workspace import (
    RewindPlan,
    Workspace,
    apply_rewind,
    lineage,
    open_objects,
    plan_rewind,
    plan_undo,
)

STATUS_WORDS = {"modified": "restored", "added": "brought back", "deleted": "removed"}


def _project(store: Store, session_id: str, fallback: Path) -> Path:
    root = store.info(session_id).project_root
    return Path(root) if root else fallback


def rewind_files(
    store: Store,
    session_id: str,
    *,
    memory_dir: Path,
    project: Path,
    to: int | None,
    undo: bool,
    dry_run: bool,
    as_json: bool,
    out: TextIO | None = None,
) -> int:
    """Run the command (see the module doc); it prints to ``out`` (stdout)."""
    out = out or sys.stdout
    session_id = store.info(session_id).id
    with store.lease(session_id):
        objects = open_objects(memory_dir, store)
        try:
            workspace = Workspace(_project(store, session_id, project), memory_dir, objects,
                                  protected=[store.memory_dir])
            try:
                recovered = workspace.recover(
                    lambda entry: objects.marks.rewind_recorded(entry.id))
                if recovered is not None and not as_json:
                    print(str(recovered), file=out)
                ancestors = lineage(store.info, session_id)
                plan = plan_undo(workspace, session_id, ancestors) if undo else plan_rewind(
                    workspace, session_id, to or 0, ancestors)
                report = _report(plan, workspace)
                report["recovered"] = None if recovered is None else str(recovered)
                if dry_run or plan.restore.empty:
                    report["done"] = False
                    _show(report, plan, as_json, out, dry_run=dry_run)
                    return 0
                rewound = apply_rewind(workspace, plan)
                report["done"] = True
                report["undo_snapshot"] = rewound.undo_root.hex()
                _show(report, plan, as_json, out, dry_run=False)
                return 0
            finally:
                workspace.close()
        finally:
            objects.close()


def _report(plan: RewindPlan, workspace: Workspace) -> dict[str, Any]:
    restore = plan.restore
    files = []
    for stat in restore.stats:
        change = stat.change
        files.append({
            "path": change.path,
            "action": STATUS_WORDS[change.status],
            "added_lines": stat.added,
            "removed_lines": stat.removed,
            "hand_edited": change.path in restore.hand_edited,
        })
    return {
        "session_id": plan.session_id,
        "to_message": plan.to or None,
        "undoes_rewind_to": plan.target.message if plan.undo else None,
        "project": workspace.project,
        "snapshot": plan.target.root.hex() if not plan.undo else plan.restore.target.hex(),
        "files": files,
        "left_alone": [{"path": a.path, "reason": a.reason} for a in restore.left_alone],
        "dry_run": False,
    }


def _show(report: dict[str, Any], plan: RewindPlan, as_json: bool, out: TextIO, *,
          dry_run: bool) -> None:
    report["dry_run"] = dry_run
    if as_json:
        json.dump(report, out, ensure_ascii=False, indent=2)
        out.write("\n")
        return
    files = report["files"]
    what = f"the files of session {plan.session_id} {plan.label}"
    if not files:
        print(f"Nothing to rewind: {what} are as they are now.", file=out)
    else:
        verb = "Would rewind" if dry_run else "Rewound"
        print(f"{verb} {what} ({report['project']}):", file=out)
        width = min(max(len(f["path"]) for f in files), 60)
        for f in files:
            lines = ("" if f["added_lines"] is None
                     else f"  +{f['added_lines']} -{f['removed_lines']}")
            flag = "  (changed since the session last saw it)" if f["hand_edited"] else ""
            print(f"  {f['path']:<{width}}  {f['action']}{lines}{flag}", file=out)
        edited = [f["path"] for f in files if f["hand_edited"]]
        if edited:
            print(f"{len(edited)} file(s) were changed after the session last saw them (by "
                  "hand, or by another program); "
                  + ("the rewind would overwrite them." if dry_run else
                     "they were kept first."), file=out)
    for alone in report["left_alone"]:
        print(f"  {alone['path']}: {alone['reason']}", file=out)
    if files and dry_run:
        print("Nothing was changed (--dry-run).", file=out)
    elif files:
        print(f"To undo: harness --rewind {plan.session_id} --undo", file=out)
