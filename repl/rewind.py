"""``harness --rewind ID --to N --files|--conversation|--both [--dry-run] [--json]``: the
project's files back to what they were when user message N was sent, the conversation back
to before it (what came after kept as a fork), or both, without a model; ``--rewind ID
--undo`` undoes the last rewind of files (or puts back what a rewind that was cut short
wrote); ``--rewind ID --finish`` finishes a rewind that was cut short.

The steps are the supervisor's (:func:`actors.runtime.rewind.carry_out`), here on the store
and the workspace directly (:class:`LocalSteps`). The session's lease is held for the whole
command (a harness running that session refuses it, and the other way round). A rewind of
the files runs only in the session's project (the directory it was started in, or
``--sandbox-dir``): anywhere else it is refused in one line naming that project.

First, what a kill left: a rewind of both cut between its halves is rolled forward, and a
rewind of the project's files cut short is finished when no path changed since (one line
each). One with paths changed since is refused with one line naming ``--finish`` and
``--undo``, which end it. ``--dry-run`` changes nothing, that included: it says what they
would do. What would change is printed before anything is written (a diffstat, hand edits
flagged: files changed since the session last looked, which the rewind overwrites but
keeps first, so ``--undo`` brings them back); with ``--dry-run`` that is all.

Ctrl-C or SIGTERM while the files are written finishes the file under way and stops, with
one line naming how to finish it or put back what it wrote; the next command says so too.
Exit status: 0 done (or nothing to do), 1 the files could not be restored (the message says
whether they were put back), 2 a user mistake (no such session or message, locked, another
project, a rewind left to finish), 130 or 143 stopped by SIGINT or SIGTERM.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from actors.core.errors import RestoreFailed, UsageError
from actors.runtime.rewind import RewindOutcome, RewindRequest, carry_out
from actors.store import Rewound as ConversationRewound
from actors.store import Store
from actors.workspace import (
    Finished,
    Interrupted,
    RewindPlan,
    Rewound,
    RolledForward,
    Workspace,
    apply_rewind,
    commands,
    finish,
    interrupted,
    lineage,
    open_objects,
    pending_roll_forward,
    plan_rewind,
    plan_undo,
    put_back,
    record_conversation,
    roll_forward,
)
from repl.interactive.sanitize import json_text

STATUS_WORDS = {"modified": "restored", "added": "brought back", "deleted": "removed"}
STOPPED_STATUS = {signal.SIGINT: 130, signal.SIGTERM: 143}


class LocalSteps:
    """The steps of :func:`carry_out` on the store and the workspace themselves."""

    def __init__(self, store: Store, workspace: Workspace, session_id: str,
                 stop: threading.Event) -> None:
        self._store = store
        self._workspace = workspace
        self._session_id = session_id
        self._stop = stop

    def files(self, plan: RewindPlan, *, with_conversation: bool) -> Rewound:
        return apply_rewind(self._workspace, plan, with_conversation=with_conversation,
                            stop=self._stop)

    def files_back(self) -> Rewound:
        plan = plan_undo(self._workspace, self._session_id,
                         lineage(self._store.info, self._session_id))
        return apply_rewind(self._workspace, plan)

    def conversation(self, before: int) -> ConversationRewound:
        return self._store.rewind(self._session_id, before)

    def conversation_done(self, files: Rewound, fork_id: str) -> None:
        record_conversation(self._workspace, files, fork_id)

    def finish_interrupted(self) -> Finished | None:
        return finish(self._workspace, stop=self._stop)

    def put_back_interrupted(self) -> Rewound | None:
        return put_back(self._workspace, session_id=self._session_id, stop=self._stop)


@contextlib.contextmanager
def stopped_by_signals(stop: threading.Event) -> Iterator[list[int]]:
    """SIGINT and SIGTERM set ``stop`` (the restore ends between two files) instead of
    ending the process; the signals that came are in the list yielded."""
    came: list[int] = []

    def handler(signum: int, _frame: object) -> None:
        came.append(signum)
        stop.set()

    previous = {s: signal.signal(s, handler) for s in STOPPED_STATUS}
    try:
        yield came
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def _project(store: Store, session_id: str, project: Path) -> Path:
    """The project a rewind of the session's files runs in: the session's own, which must be
    where the command runs."""
    recorded = store.info(session_id).project_root
    here = project.resolve()
    if recorded and Path(recorded).resolve() != here:
        raise UsageError(f"Session {session_id} belongs to the project {recorded}; run the "
                         f"rewind there (this is {here}).")
    if not recorded:
        raise UsageError(f"Session {session_id} has no project recorded (an older record); "
                         "resume it in its project once (`harness -r ID` there), so that its "
                         "snapshots are tied to it.")
    return here


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
    finish_pending: bool = False,
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
    files = what != "conversation" or undo or finish_pending
    here = _project(store, session_id, project) if files else project
    with store.lease(session_id):
        objects = open_objects(memory_dir, store)
        try:
            said: list[str] = []
            rolled = _roll_forward(objects, store, session_id, said, dry_run=dry_run,
                                   undo=undo)
            if rolled is not None and what == "conversation" and to == rolled.to:
                return _conversation(store, session_id, to, dry_run, as_json, out, said,
                                     rolled=rolled)
            if what in ("conversation", "both") and not (undo or finish_pending) and to not in {
                m.number for m in store.user_messages(session_id)
            }:
                raise UsageError(f"Message {to} is not one you typed in session {session_id}; "
                                 "--info and --export number the messages.")
            if what == "conversation" and not (undo or finish_pending):
                return _conversation(store, session_id, to or 0, dry_run, as_json, out, said)
            workspace = Workspace(here, memory_dir, objects, protected=[store.memory_dir])
            try:
                return _files(store, workspace, session_id, to=to, undo=undo,
                              finish_pending=finish_pending, both=what == "both",
                              dry_run=dry_run, as_json=as_json, out=out, said=said)
            finally:
                workspace.close()
        finally:
            objects.close()


def _roll_forward(objects: Any, store: Store, session_id: str, said: list[str], *,
                  dry_run: bool, undo: bool) -> RolledForward | None:
    """A rewind of both cut between its halves: finished (a dry run only says it would be)."""
    if dry_run:
        mark = pending_roll_forward(objects, session_id)
        if mark is not None:
            said.append(f"A rewind of session {session_id} to message {mark.message} was "
                        "interrupted after its files were rewound; the next command finishes "
                        "it (the conversation then ends before that message too).")
        return None
    try:
        rolled = roll_forward(objects, store, session_id)
    except RestoreFailed as exc:
        if not undo:
            raise
        said.append(str(exc))  # the undo of its files ends it instead
        return None
    if rolled is not None:
        said.append(str(rolled))
    return rolled


def _files(store: Store, workspace: Workspace, session_id: str, *, to: int | None,
           undo: bool, finish_pending: bool, both: bool, dry_run: bool, as_json: bool,
           out: TextIO, said: list[str]) -> int:
    found = interrupted(workspace)
    if found is not None:
        taken = _interrupted(store, workspace, session_id, found, undo=undo,
                             finish_pending=finish_pending, dry_run=dry_run,
                             as_json=as_json, out=out, said=said)
        if taken is not None:
            return taken
    elif finish_pending:
        said.append("No rewind of this project's files was interrupted: nothing to finish.")
        return _notes_only(said, as_json, out)
    if not as_json:
        for line in said:
            print(line, file=out)
    ancestors = lineage(store.info, session_id)
    plan = plan_undo(workspace, session_id, ancestors) if undo else plan_rewind(
        workspace, session_id, to or 0, ancestors)
    report = plan_report(plan, workspace.project)
    report["notes"] = said
    report["conversation"] = {"rewound": False} if both else None
    if dry_run or (plan.restore.empty and not both):
        report["done"] = False
        _show(report, plan, as_json, out, dry_run=dry_run)
        if both and not as_json:
            print(f"The conversation would go back to before message {to} (what came after "
                  "is kept as a fork).", file=out)
        return 0
    stop = threading.Event()
    request = (RewindRequest(undo=True, files_plan=plan) if undo else
               RewindRequest(before=to or 0, conversation=both, files=True, files_plan=plan))
    with stopped_by_signals(stop) as came:
        outcome = carry_out(request, LocalSteps(store, workspace, session_id, stop))
    files = outcome.files
    assert files is not None
    if files.stopped:
        return _stopped(files, session_id, came, as_json, out, report)
    report["done"] = True
    report["undo_snapshot"] = files.undo_root.hex()
    report["left_alone"] += [{"path": p, "reason": CHANGED_MEANWHILE} for p in files.left]
    if outcome.messages is not None:
        report["conversation"] = {"rewound": True, "fork_id": outcome.fork_id,
                                  "context_messages": len(outcome.messages)}
    _show(report, plan, as_json, out, dry_run=False)
    if not as_json:
        _after(outcome, to, out)
    return 0


CHANGED_MEANWHILE = "left as it is: it changed while the rewind ran"


def _after(outcome: RewindOutcome, to: int | None, out: TextIO) -> None:
    if outcome.messages is not None:
        print(f"The conversation now ends before message {to}; what came after is kept in "
              f"session {outcome.fork_id}.", file=out)
    if outcome.resume:
        print(f"The conversation of that rewind stays as it is; as it was before it, it is "
              f"kept in session {outcome.resume} (`harness -r {outcome.resume}` continues "
              "it).", file=out)


def _interrupted(store: Store, workspace: Workspace, session_id: str, found: Interrupted, *,
                 undo: bool, finish_pending: bool, dry_run: bool, as_json: bool,
                 out: TextIO, said: list[str]) -> int | None:
    """A rewind of the project's files cut short: ended as asked (``--finish``, ``--undo``:
    the status), or finished first when nothing changed since (None: go on)."""
    recorded = found.pending.recorded
    if dry_run:
        if not recorded:
            said.append(f"{found.what} was interrupted before it started; the next command "
                        "forgets it (nothing was changed).")
        elif undo:
            said.append(f"{found.what} was interrupted; --undo would put back the "
                        f"{len(found.pending.standing.done)} paths it wrote"
                        + _changed_note(found) + ".")
        else:
            said.append(f"{found.what} was interrupted; finishing it would write "
                        f"{len(found.pending.standing.todo)} more paths"
                        + _changed_note(found) + ".")
        said.append("Nothing was changed (--dry-run).")
        return _notes_only(said, as_json, out)
    if undo and recorded:
        stop = threading.Event()
        with stopped_by_signals(stop) as came:
            outcome = carry_out(RewindRequest(interrupted="put_back"),
                                LocalSteps(store, workspace, session_id, stop))
        back = outcome.files
        assert back is not None
        if back.stopped:
            return _stopped(back, session_id, came, as_json, out, {"notes": said})
        said.append(f"{found.what} was interrupted; what it wrote was put back "
                    f"({back.changed} paths){_changed_note(found)}. `harness --rewind "
                    f"{session_id} --undo` undoes this in turn.")
        return _notes_only(said, as_json, out)
    if finish_pending or not recorded or not found.changed:
        stop = threading.Event()
        with stopped_by_signals(stop) as came:
            outcome = carry_out(RewindRequest(interrupted="finish"),
                                LocalSteps(store, workspace, session_id, stop))
        assert outcome.finished is not None
        said.append(str(outcome.finished))
        if outcome.finished.applied.stopped:
            _print_notes(said, as_json, out)
            return STOPPED_STATUS.get(signal.Signals(came[0]), 130) if came else 130
        if finish_pending:
            return _notes_only(said, as_json, out)
        return None
    raise UsageError(found.refusal())


def _changed_note(found: Interrupted) -> str:
    if not found.changed:
        return ""
    return (f", leaving the {len(found.changed)} files changed since as they are "
            f"({', '.join(found.changed[:5])})")


def _stopped(files: Rewound, session_id: str, came: list[int], as_json: bool, out: TextIO,
             report: dict[str, Any]) -> int:
    line = (f"Stopped after {files.changed} of {files.total} paths; the rewind is pending: "
            f"{commands(session_id)}.")
    report["done"] = False
    report["stopped"] = True
    report.setdefault("notes", []).append(line)
    if as_json:
        out.write(json_text(report, indent=2) + "\n")
    print(f"harness: {line}", file=sys.stderr)
    return STOPPED_STATUS.get(signal.Signals(came[0]), 130) if came else 130


def _print_notes(said: list[str], as_json: bool, out: TextIO) -> None:
    if as_json:
        out.write(json_text({"notes": said}, indent=2) + "\n")
    else:
        for line in said:
            print(line, file=out)


def _notes_only(said: list[str], as_json: bool, out: TextIO) -> int:
    _print_notes(said, as_json, out)
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


def plan_report(plan: RewindPlan, project: str) -> dict[str, Any]:
    """What ``plan`` would do, as the JSON report (and :func:`diffstat_lines`) read it."""
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

