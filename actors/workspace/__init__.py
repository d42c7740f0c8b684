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
    from actors.workspace._diff import Stat
    from actors.workspace._journal import JournalEntry
    from actors.workspace._marks import Mark, Marks
    from actors.workspace._objects import Collected, ObjectStore, Usage
    from actors.workspace._restore import LeftAlone, RestorePlan
    from actors.workspace._rewind import (
        Ancestor,
        RewindPlan,
        Rewound,
        RolledForward,
        apply_rewind,
        lineage,
        marks_of,
        message_marks,
        plan_rewind,
        plan_undo,
        roll_forward,
    )
    from actors.workspace._snapshot import KeptOut, Limits, Snapshot
    from actors.workspace._tree import EMPTY_TREE, Change, Entry, short
    from actors.workspace._workspace import Recovered, Workspace, open_objects, workspace_home

# The names below are imported when first used (PEP 562): every start imports the keeper,
# and with it this package, while the engine's modules are needed only once the workspace
# is opened, after the first prompt (docs/decisions.md, "Nothing the first prompt does not
# need runs before it").
_WHERE = {
    "Stat": "_diff", "JournalEntry": "_journal", "Mark": "_marks", "Marks": "_marks",
    "Collected": "_objects", "ObjectStore": "_objects", "Usage": "_objects",
    "LeftAlone": "_restore", "RestorePlan": "_restore",
    **dict.fromkeys(("Ancestor", "RewindPlan", "Rewound", "RolledForward", "apply_rewind",
                     "lineage", "marks_of", "message_marks", "plan_rewind", "plan_undo",
                     "roll_forward"), "_rewind"),
    "KeptOut": "_snapshot", "Limits": "_snapshot", "Snapshot": "_snapshot",
    "EMPTY_TREE": "_tree", "Change": "_tree", "Entry": "_tree", "short": "_tree",
    "Recovered": "_workspace", "Workspace": "_workspace", "open_objects": "_workspace",
    "workspace_home": "_workspace",
}


__getattr__ = names_from(__name__, globals(), _WHERE)


__all__ = [
    "EMPTY_TREE",
    "Ancestor",
    "Change",
    "Collected",
    "Entry",
    "JournalEntry",
    "KeptOut",
    "LeftAlone",
    "Limits",
    "Mark",
    "Marks",
    "ObjectStore",
    "Recovered",
    "RestorePlan",
    "RewindPlan",
    "Rewound",
    "RolledForward",
    "Snapshot",
    "Stat",
    "Usage",
    "Workspace",
    "apply_rewind",
    "lineage",
    "marks_of",
    "message_marks",
    "open_objects",
    "plan_rewind",
    "plan_undo",
    "roll_forward",
    "short",
    "workspace_home",
]
