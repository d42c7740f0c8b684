"""``harness --rewind ID --to N --files|--conversation|--both [--dry-run] [--json]``: the
project's files back to what they were when user message N was sent, the conversation back
to before it (what came after kept as a fork), or both, without a model; ``--rewind ID
--undo`` undoes the last rewind of files.

Both: the files first (journaled: done or not started), then the conversation; if the
conversation cannot be rewound, the files are put back and nothing was rewound. Once the
files' rewind is recorded the whole rewind counts as done: a kill -9 before the conversation
follows is rolled forward at the next open of the session (this command, a resume), which
says so in one line.

The session's lease is held for the whole command (a harness running that session refuses
it, and the other way round), and an interrupted rewind is finished or undone first. What
would change is printed before anything is written (a diffstat, hand edits flagged: files
changed since the session last looked, which the rewind would overwrite); with
``--dry-run`` that is all. The files restored are kept first, so ``--undo`` brings them back.
Exit status: 0 done (or nothing to do), 1 the files could not be restored (the message says
whether they were put back), 2 a user mistake (no such session or message, locked).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, TextIO

from actors.core.errors import HarnessError, RestoreFailed, UsageError
from actors.store import Store
from actors.workspace import (
    RewindPlan,
    RolledForward,
    Workspace,
    apply_rewind,
    lineage,
    open_objects,
    plan_rewind,
    plan_undo,
    roll_forward,
)
from actors.workspace._rewind import record_conversation
from repl.interactive.sanitize import json_text

STATUS_WORDS = {"modified": "restored", "added": "brought back", "deleted": "removed"}


def _project(store: Store, session_id: str, fallback: Path) -> Path:
    root = store.info(session_id).project_root
    return Path(root) if root else fallback


def rewind(
    store: Store,
    session_id: str,
    *,
    what: str,
    memory_dir: Path,
    project: Path,
    to: int | None,
    undo: bool,
    dry_run: bool,
    as_json: bool,
    out: TextIO | None = None,
) -> int:
    """Run the command (see the module doc); it prints to ``out`` (stdout). ``what``:
    "files", "conversation" or "both"."""
    out = out or sys.stdout
    info = store.info(session_id)
    session_id = info.id
    if to is not None and to > info.transcript_messages:
        raise UsageError(f"Session {session_id} has no message {to} (its messages are "
                         f"numbered 1 to {info.transcript_messages}, as --info shows).")
    with store.lease(session_id):
        objects = open_objects(memory_dir, store)
        try:
            said: list[str] = []
            try:  # a rewind of both that a kill cut between its halves is finished first
                rolled = roll_forward(objects, store, session_id)
            except RestoreFailed as exc:
                if not undo:
                    raise
                rolled = None  # the undo of its files ends it instead
                said.append(str(exc))
            if rolled is not None:
                said.append(str(rolled))
                if what == "conversation" and to == rolled.to:  # what it finished was this
                    return _conversation(store, session_id, to, dry_run, as_json, out, said,
                                         rolled=rolled)
            if what in ("conversation", "both") and to not in {
                m.number for m in store.user_messages(session_id)
            }:
                raise UsageError(f"Message {to} is not one you typed in session {session_id}; "
                                 "--info and --export number the messages.")
            if what == "conversation":
                return _conversation(store, session_id, to or 0, dry_run, as_json, out, said)
            workspace = Workspace(_project(store, session_id, project), memory_dir, objects,
                                  protected=[store.memory_dir])
            try:
                return _files(store, workspace, session_id, to=to, undo=undo,
                              both=what == "both", dry_run=dry_run, as_json=as_json, out=out,
                              said=said)
            finally:
                workspace.close()
        finally:
            objects.close()


def _files(store: Store, workspace: Workspace, session_id: str, *, to: int | None,
           undo: bool, both: bool, dry_run: bool, as_json: bool, out: TextIO,
           said: list[str]) -> int:
    objects = workspace.objects
    recovered = workspace.recover(lambda entry: objects.marks.rewind_recorded(entry.id))
    if recovered is not None:
        said.insert(0, str(recovered))
    if not as_json:
        for line in said:
            print(line, file=out)
    ancestors = lineage(store.info, session_id)
    plan = plan_undo(workspace, session_id, ancestors) if undo else plan_rewind(
        workspace, session_id, to or 0, ancestors)
    report = _report(plan, workspace.project)
    report["notes"] = said
    report["conversation"] = {"rewound": False} if both else None
    if dry_run or (plan.restore.empty and not both):
        report["done"] = False
        _show(report, plan, as_json, out, dry_run=dry_run)
        if both and not as_json:
            print(f"The conversation would go back to before message {to} (what came after "
                  "is kept as a fork).", file=out)
        return 0
    rewound = apply_rewind(workspace, plan, with_conversation=both)
    report["done"] = True
    report["undo_snapshot"] = rewound.undo_root.hex()
    if both:  # from here the rewind is done: a kill now is rolled forward at the next open
        try:
            done = store.rewind(session_id, to or 0)
        except HarnessError as exc:
            back = apply_rewind(workspace, plan_undo(workspace, session_id, ancestors))
            raise RestoreFailed(
                f"The conversation could not be rewound ({exc}); the files were put back "
                f"as they were ({back.changed} paths), so nothing was rewound.",
                rolled_back=True,
            ) from None
        record_conversation(workspace, rewound, done.fork_id)
        report["conversation"] = {"rewound": True, "fork_id": done.fork_id,
                                  "context_messages": len(done.messages)}
    _show(report, plan, as_json, out, dry_run=False)
    if both and not as_json:
        print(f"The conversation now ends before message {to}; what came after is kept in "
              f"session {report['conversation']['fork_id']}.", file=out)
    return 0


def _conversation(store: Store, session_id: str, to: int, dry_run: bool, as_json: bool,
                  out: TextIO, said: list[str], *, rolled: RolledForward | None = None) -> int:
    report: dict[str, Any] = {"session_id": session_id, "to_message": to, "files": None,
                              "dry_run": dry_run, "done": False, "notes": said,
                              "conversation": {"rewound": False}}
    if rolled is not None:  # an interrupted rewind of both to this message, just finished
        report["done"] = True
        report["conversation"] = {"rewound": True, "fork_id": rolled.fork_id,
                                  "context_messages": len(store.load_context(session_id))}
    elif not dry_run:
        done = store.rewind(session_id, to)
        report["done"] = True
        report["conversation"] = {"rewound": True, "fork_id": done.fork_id,
                                  "context_messages": len(done.messages)}
    if as_json:
        out.write(json_text(report, indent=2) + "\n")
        return 0
    for line in said:
        print(line, file=out)
    if rolled is not None:
        return 0
    if dry_run:
        print(f"Would rewind the conversation of session {session_id} to before message "
              f"{to} (what came after is kept as a fork); the files stay as they are. "
              "Nothing was changed (--dry-run).", file=out)
    else:
        print(f"The conversation of session {session_id} now ends before message {to}; what "
              f"came after is kept in session {report['conversation']['fork_id']}. The files "
              "stay as they are.", file=out)
    return 0


def _report(plan: RewindPlan, project: str) -> dict[str, Any]:
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
        "project": project,
        "snapshot": plan.target.root.hex() if not plan.undo else plan.restore.target.hex(),
        "files": files,
        "left_alone": [{"path": a.path, "reason": a.reason} for a in restore.left_alone],
        "dry_run": False,
    }


def diffstat_lines(report: dict[str, Any], *, done: bool) -> list[str]:
    """A plan's files as lines (path, action, lines added and removed, hand edits flagged),
    then what it leaves alone: for this command and for ``\\rewind`` in the REPL."""
    files = report["files"]
    lines = []
    width = min(max((len(f["path"]) for f in files), default=0), 60)
    for f in files:
        counts = ("" if f["added_lines"] is None
                  else f"  +{f['added_lines']} -{f['removed_lines']}")
        flag = "  (changed since the session last saw it)" if f["hand_edited"] else ""
        lines.append(f"  {f['path']:<{width}}  {f['action']}{counts}{flag}")
    edited = [f["path"] for f in files if f["hand_edited"]]
    if edited:
        lines.append(f"{len(edited)} changed since the session last saw them (by hand?); "
                     + ("a copy was kept first." if done else "a copy is kept first."))
    lines.extend(f"  {a['path']}: {a['reason']}" for a in report["left_alone"])
    return lines


def plan_report(plan: RewindPlan, project: str) -> dict[str, Any]:
    """What ``plan`` would do, as the JSON report (and :func:`diffstat_lines`) read it."""
    return _report(plan, project)


def _show(report: dict[str, Any], plan: RewindPlan, as_json: bool, out: TextIO, *,
          dry_run: bool) -> None:
    report["dry_run"] = dry_run
    if as_json:
        out.write(json_text(report, indent=2) + "\n")
        return
    files = report["files"]
    what = f"the files of session {plan.session_id} {plan.label}"
    if not files:
        print(f"Nothing to rewind: {what} are as they are now.", file=out)
    else:
        verb = "Would rewind" if dry_run else "Rewound"
        print(f"{verb} {what} ({report['project']}):", file=out)
    for line in diffstat_lines(report, done=not dry_run):
        print(line, file=out)
    if files and dry_run:
        print("Nothing was changed (--dry-run).", file=out)
    elif files:
        print(f"To undo: harness --rewind {plan.session_id} --undo", file=out)
