"""Workspace checkpoints: snapshots of the project's files, so a rewind can bring them back.

A snapshot is taken at every user message and before every side-effecting tool call (and
after a shell command, so what it created, changed and deleted is known). Snapshots are
content-addressed and deduplicated across snapshots, sessions and projects; a snapshot costs
what changed since the last one (stat-based change detection with a cache), and a changed
file is kept as a delta of its earlier version; ``.gitignore`` and size caps decide what is
kept, and what is kept out is said; the store is kept under a quota. Permissions are kept.

Every write a restore makes to the project can be undone, and none overwrites what changed
since the restore looked (the protocol, in :mod:`._rewind`)::

    1 undo point   lock the project; snapshot it as it is (every path the restore touches,
                   ignored ones too, content and permissions); its objects stored
    2 journal      <memory-dir>/workspace/journal/<project>.json: undo point, target, id;
                   written, fsynced, renamed, directory fsynced
    3 record       the session's ``rewind`` mark (target, undo point, project), committed
                   with synchronous=FULL: the commit point; --undo has its undo point
    4 apply        each path written only if still as the undo point has it; a signal
                   stops between two paths
    5 end          the journal removed

A kill before 3: nothing was written, the journal is forgotten (said). After 3: each path
is to do (as the undo point), done (as the target) or changed since (anything else: left
alone, listed). Nothing changed since: the next open finishes it (said in one line).
Otherwise the user decides: finish (only what is to do) or put back (a restore of its own,
by the same steps, of only what is done); print mode and headless commands refuse in one
line naming both, the REPL says so and ``\\rewind`` asks. A restore touches only what both
snapshots saw: never anything below a directory either did not look in.

Layout::

    _ignore.py     .gitignore rules, read as git reads them
    _tree.py       blobs, trees (entries with permissions), oids
    _delta.py      a file's new content as a delta of an earlier version (zlib, zdict)
    _objects.py    the object store (SQLite file or PostgreSQL tables), collection
    _database.py   the SQLite file of the objects, beside the session store
    _paths.py      where the workspace's state is in the memory dir (cheap to ask)
    _statcache.py  what the last snapshot saw, so the next one reads only what changed
    _snapshot.py   taking a snapshot: the confined walk, the caps, new objects
    _diff.py       changes between snapshots, diffstat, unified diff
    _restore.py    the plan (hand edits flagged), where each path stands, the writes
    _journal.py    the restore journal: which restore may be under way
    _marks.py      which snapshot belongs to which message or call of which session
    _calls.py      what each tool call changed, for --info/--export --files and \\files
    _housekeeping.py  collection, the quota, what --doctor shows
    _workspace.py  one project's snapshots, lock, the steps of a restore
    _rewind.py     the protocol: a session's files back to a user message, recorded;
                   undo; a rewind cut short taken up (finished or put back)
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
