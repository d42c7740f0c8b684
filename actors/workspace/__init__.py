"""Workspace checkpoints: snapshots of the project's files, so a rewind can bring them back.

A snapshot is taken at every user message and before every side-effecting tool call (and
after a shell command, so what it created, changed and deleted is known). Snapshots are
content-addressed and deduplicated across snapshots, sessions and projects; a snapshot costs
what changed since the last one (stat-based change detection with a cache); ``.gitignore``
and size caps decide what is kept, and what is kept out is said. Restoring goes through the
tools' sandbox, journaled so that a rewind is either done or not started.

Layout::

    _ignore.py     .gitignore rules, read as git reads them
    _tree.py       blobs, trees, entries, oids
    _objects.py    the object store (SQLite file or PostgreSQL tables), collection
    _database.py   the SQLite file of the objects, beside the session store
    _statcache.py  what the last snapshot saw, so the next one reads only what changed
    _snapshot.py   taking a snapshot: the confined walk, the caps, new objects
    _diff.py       changes between snapshots, diffstat, unified diff
    _restore.py    the plan (with hand edits flagged) and the confined writes
    _journal.py    the rewind journal: done or not started
    _marks.py      which snapshot belongs to which message or call of which session
    _workspace.py  one project's snapshots, lock, restore in steps, recovery
    _rewind.py     a session's files back to a user message, recorded; undo
    keeper.py      the actor that owns the project's snapshots during a run

Everything here blocks (file I/O, the database); the runtime calls it from worker threads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from actors.core.lazy import names_from

if TYPE_CHECKING:
    from actors.workspace._calls import call_lines, call_summary, calls_changing_files, calls_json
    from actors.workspace._diff import Stat
    from actors.workspace._housekeeping import collect, quota_for, report
    from actors.workspace._marks import Mark, Marks
    from actors.workspace._objects import Collected, ObjectStore, Usage
    from actors.workspace._paths import journal_path, workspace_home
    from actors.workspace._restore import LeftAlone, RestorePlan
    from actors.workspace._rewind import (
        Ancestor,
        Finished,
        Interrupted,
        RewindPlan,
        Rewound,
        RolledForward,
        apply_rewind,
        commands,
        finish,
        interrupted,
        lineage,
        marks_of,
        message_marks,
        pending_roll_forward,
        plan_rewind,
        plan_undo,
        put_back,
        record_conversation,
        roll_forward,
        settle,
    )
    from actors.workspace._snapshot import KeptOut, Limits, Snapshot
    from actors.workspace._tree import EMPTY_TREE, Change, Entry, short
    from actors.workspace._workspace import Pending, Workspace, open_objects

# The names below are imported when first used (PEP 562): every start imports the keeper,
# and with it this package, while the engine's modules are needed only once the workspace
# is opened, after the first prompt (docs/decisions.md, "Nothing the first prompt does not
# need runs before it").
_WHERE = {
    **dict.fromkeys(("call_lines", "call_summary", "calls_changing_files", "calls_json"),
                    "_calls"),
    "Stat": "_diff", "collect": "_housekeeping", "quota_for": "_housekeeping",
    "report": "_housekeeping",
    "Mark": "_marks", "Marks": "_marks",
    "Collected": "_objects", "ObjectStore": "_objects", "Usage": "_objects",
    "LeftAlone": "_restore", "RestorePlan": "_restore",
    **dict.fromkeys(("Ancestor", "Finished", "Interrupted", "RewindPlan", "Rewound",
                     "RolledForward", "apply_rewind", "commands", "finish", "interrupted",
                     "lineage", "marks_of", "message_marks", "pending_roll_forward", "plan_rewind",
                     "plan_undo",
                     "put_back", "record_conversation", "roll_forward", "settle"), "_rewind"),
    "KeptOut": "_snapshot", "Limits": "_snapshot", "Snapshot": "_snapshot",
    "EMPTY_TREE": "_tree", "Change": "_tree", "Entry": "_tree", "short": "_tree",
    "Pending": "_workspace", "Workspace": "_workspace", "open_objects": "_workspace",
    "journal_path": "_paths", "workspace_home": "_paths",
}


__getattr__ = names_from(__name__, globals(), _WHERE)


__all__ = [
    "EMPTY_TREE",
    "Ancestor",
    "Change",
    "Collected",
    "Entry",
    "Finished",
    "Interrupted",
    "KeptOut",
    "LeftAlone",
    "Limits",
    "Mark",
    "Marks",
    "ObjectStore",
    "Pending",
    "RestorePlan",
    "RewindPlan",
    "Rewound",
    "RolledForward",
    "Snapshot",
    "Stat",
    "Usage",
    "Workspace",
    "apply_rewind",
    "call_lines",
    "call_summary",
    "calls_changing_files",
    "calls_json",
    "collect",
    "commands",
    "finish",
    "interrupted",
    "journal_path",
    "lineage",
    "marks_of",
    "message_marks",
    "open_objects",
    "pending_roll_forward",
    "plan_rewind",
    "plan_undo",
    "put_back",
    "quota_for",
    "record_conversation",
    "report",
    "roll_forward",
    "settle",
    "short",
    "workspace_home",
]
