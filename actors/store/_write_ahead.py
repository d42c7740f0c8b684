"""Write-ahead records of tool calls: ``planned`` when asked for, ``started`` before running.

The ``tool_calls`` table holds one row per tool call that has no result yet. A checkpoint
with ``planned_calls`` records the calls of its new assistant messages as ``planned`` (in the
checkpoint's own transaction); :func:`mark_started` flips them to ``started`` just before a
tool runs; :func:`mark_process_group` adds the process group a started command runs in; a
tool result deletes its call's row. After a crash, :func:`notice_for` tells recovery what to
answer: a started (or untracked) call's outcome is unknown, a planned one never ran and is
safe to retry; for a command whose group was recorded, recovery stops what survived and adds
whether it was still running (:mod:`actors.store._survivors`). Nothing is ever replayed.

Functions over a connection inside the caller's transaction; no I/O of their own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from actors.core.messages import INTERRUPTED_NOTICE, NOT_STARTED_NOTICE, Message, call_ids_of
from actors.store._parts import Conn

_SET_PHASE = (
    "INSERT INTO tool_calls (session_rid, call_id, phase) VALUES (?, ?, ?) "
    "ON CONFLICT (session_rid, call_id) DO UPDATE SET phase = excluded.phase"
)
_SET_PHASES = (
    "INSERT INTO tool_calls (session_rid, call_id, phase) VALUES {} "
    "ON CONFLICT (session_rid, call_id) DO UPDATE SET phase = excluded.phase"
)
_ONE_STATEMENT = 256  # calls recorded or deleted by one statement (a checkpoint's few)


def changes_of(messages: Sequence[Message], *, planned_calls: bool) -> dict[str, str | None]:
    """What appending ``messages`` does to the records: call id -> its new phase
    (``"planned"``), or None where a result answers a call recorded before. A call made and
    answered in the same messages (a batch of reads saved with its answer) was never
    recorded: nothing is written for it."""
    phases: dict[str, str | None] = {}
    made: set[str] = set()
    for message in messages:
        if message.get("role") == "tool":
            call_id = str(message.get("tool_call_id"))
            if call_id in made:
                phases.pop(call_id, None)
            else:
                phases[call_id] = None
        else:
            calls = call_ids_of(message)
            made.update(calls)
            if planned_calls:
                phases.update(dict.fromkeys(calls, "planned"))
    return phases


def apply(conn: Conn, rid: int, changes: dict[str, str | None]) -> None:
    """Write :func:`changes_of`'s answer for session ``rid`` (at most two statements: the
    answered calls' records deleted, the new ones recorded, each one statement whatever
    their number)."""
    answered = [call_id for call_id, phase in changes.items() if phase is None]
    if len(answered) > _ONE_STATEMENT:  # an import: fewer than the placeholders allowed
        conn.executemany("DELETE FROM tool_calls WHERE session_rid = ? AND call_id = ?",
                         [(rid, call_id) for call_id in answered])
    elif answered:
        conn.execute("DELETE FROM tool_calls WHERE session_rid = ? AND call_id IN ("
                     + ", ".join("?" * len(answered)) + ")", (rid, *answered))
    planned = [(rid, call_id, phase) for call_id, phase in changes.items() if phase]
    if len(planned) > _ONE_STATEMENT:
        conn.executemany(_SET_PHASE, planned)
    elif planned:  # one statement for a checkpoint's few calls
        conn.execute(_SET_PHASES.format(", ".join(["(?, ?, ?)"] * len(planned))),
                     [value for row in planned for value in row])


def mark_started(conn: Conn, rid: int, call_ids: Iterable[str]) -> None:
    """Record that these calls of session ``rid`` are about to start."""
    rows = [(rid, call_id, "started") for call_id in call_ids]
    if rows:
        conn.executemany(_SET_PHASE, rows)


def mark_process_group(conn: Conn, rid: int, call_id: str, pgid: int,
                       leader_start: int | None, host: str) -> None:
    """Record the process group a started call of session ``rid`` runs in."""
    conn.execute(
        "UPDATE tool_calls SET pgid = ?, leader_start = ?, host = ? "
        "WHERE session_rid = ? AND call_id = ? AND phase = 'started'",
        (pgid, leader_start, host, rid, call_id),
    )


@dataclass(frozen=True)
class ProcessRecord:
    """A started call's process group as recorded."""

    pgid: int
    leader_start: int | None
    host: str | None


def process_groups(conn: Conn, rid: int) -> dict[str, ProcessRecord]:
    """Call id -> its recorded process group, for session ``rid``'s started calls."""
    return {
        call_id: ProcessRecord(int(pgid), leader_start, host)
        for call_id, pgid, leader_start, host in conn.execute(
            "SELECT call_id, pgid, leader_start, host FROM tool_calls "
            "WHERE session_rid = ? AND phase = 'started' AND pgid IS NOT NULL",
            (rid,),
        )
    }


def phases(conn: Conn, rid: int) -> dict[str, str]:
    """Call id -> ``planned``/``started`` for session ``rid``'s unanswered calls."""
    return dict(
        conn.execute("SELECT call_id, phase FROM tool_calls WHERE session_rid = ?", (rid,))
    )


def notice_for(
    phases: dict[str, str], survivors: Mapping[str, str] | None = None
) -> Callable[[str], str]:
    """The result recovery gives an open call: "not executed" when it was only planned,
    "outcome unknown" when it started or was never recorded (older records, scripts),
    followed, for a command, by what became of its process group (``survivors``: call id ->
    the line). The first line is always the exact notice."""

    def notice(call_id: str) -> str:
        if phases.get(call_id) == "planned":
            return NOT_STARTED_NOTICE
        line = (survivors or {}).get(call_id)
        return f"{INTERRUPTED_NOTICE}\n{line}" if line else INTERRUPTED_NOTICE

    return notice
