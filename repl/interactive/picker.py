"""The resume picker: ``harness -r`` (``--resume`` without an id) and ``\\resume`` in the REPL.

This project's sessions (``--all``: every project's, with a project column), most recent
first, as ``--list-sessions`` shows them. Typing filters through full-text search (every
word, anywhere in the title, summary or transcript; the row then shows the matching text
and its message number). Under the list, the highlighted session's lineage and its last
exchanges. Keys: Enter resumes; Ctrl-F forks it and resumes the fork (the original stays as
it is); Ctrl-X archives it (``--unarchive`` brings it back); Ctrl-R renames it; Esc leaves
without resuming anything.

:func:`pick` answers what to resume (an id) or None. The picker reads through the store's
read-only face; its fork, archive and rename go through :mod:`repl.session_edits` (the
running session's writer, or before any runs the store opened for writing). Store calls run
in worker threads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from actors.core.errors import HarnessError, UsageError
from actors.core.previews import clean_title
from actors.store import ListedSession, SessionReader, Store
from repl import listing
from repl.exchanges import exchange_lines
from repl.interactive.chooser import Action, Chooser, Row
from repl.session_edits import SessionEdits, StoreEdits

PREVIEW_MESSAGES = 10
SEARCH_LIMIT = 200


@dataclass(frozen=True)
class Picked:
    """What the picker chose: resume ``session_id`` (``forked_from``: a fork just made)."""

    session_id: str
    forked_from: str | None = None


class SessionPicker:
    def __init__(self, store: SessionReader, edits: SessionEdits, project_root: str | None, *,
                 current: str | None = None):
        self.store = store
        self.edits = edits
        self.project_root = project_root  # None: every project
        self.current = current  # the session the REPL runs (not offered)
        where = f"this project ({listing.project_name(project_root)})" if project_root else (
            "every project")
        self.chooser = Chooser(
            title=f"Resume a session of {where}: type to search",
            load=self.load,
            preview=self.preview,
            actions=[
                Action("c-f", "fork", self._fork),
                Action("c-x", "archive", self._archive),
                Action("c-r", "rename", self._rename),
            ],
            enter_label="resume",
        )

    # -- rows and previews ------------------------------------------------------------------

    def load(self, query: str) -> tuple[str, list[Row]]:
        items: Sequence[ListedSession]
        if query.strip():
            items = self.store.search_sessions(query, project_root=self.project_root,
                                               limit=SEARCH_LIMIT)
        else:
            items = self.store.list_sessions(project_root=self.project_root,
                                             include_empty=False)
        items = [i for i in items if i["id"] != self.current]
        lines = listing.table(items, with_project=self.project_root is None)
        rows = [Row(str(item["id"]), line[2:] if line.startswith("  ") else line, item)
                for item, line in zip(items, lines[1:], strict=True)]
        return lines[0], rows

    def preview(self, row: Row) -> list[str]:
        item: dict[str, Any] = row.data
        lines = []
        heading = listing.lineage(item)
        if heading:
            lines.append(heading[0].upper() + heading[1:] + ".")
        recent = self.store.recent_messages(row.key, PREVIEW_MESSAGES)
        body = exchange_lines(recent, width=160)
        return lines + (body[-(8 - len(lines)):] if body else ["(no messages yet)"])

    # -- actions ----------------------------------------------------------------------------

    async def _fork(self, chooser: Chooser, row: Row) -> None:
        try:
            new_id = await self.edits.fork(row.key)
        except HarnessError as exc:
            chooser.say(str(exc))
            return
        chooser.finish(Picked(new_id, forked_from=row.key))

    async def _archive(self, chooser: Chooser, row: Row) -> None:
        try:
            await self.edits.archive(row.key)
        except HarnessError as exc:
            chooser.say(str(exc))
            return
        chooser.say(f"Archived {row.key} (harness --unarchive {row.key} brings it back).")
        await chooser.reload()

    async def _rename(self, chooser: Chooser, row: Row) -> None:
        async def done(typed: str) -> None:
            title = clean_title(typed)
            if not title:
                chooser.say("Not renamed: the title is empty.")
                return
            try:
                await self.edits.rename(row.key, title)
            except HarnessError as exc:
                chooser.say(str(exc))
                return
            chooser.say(f"Renamed {row.key}: {title}")
            chooser.forget_preview(row.key)
            await chooser.reload()

        chooser.ask("New title: ", str(row.data.get("title") or ""), done)

    # -- running ----------------------------------------------------------------------------

    @staticmethod
    def _picked(result: Any) -> Picked | None:
        if isinstance(result, Picked):
            return result
        if isinstance(result, Row):
            return Picked(result.key)
        return None

    def run(self) -> Picked | None:
        return self._picked(self.chooser.run())

    async def run_async(self) -> Picked | None:
        return self._picked(await self.chooser.run_async())


def nothing_to_resume(project_root: str | None, *, other: bool = False) -> str:
    """What is said instead of an empty picker."""
    what = "other saved session" if other else "saved session"
    if project_root is None:
        return f"No {what} to resume (archived ones are not offered)."
    return (f"No {what} of this project to resume ({listing.project_name(project_root)}; "
            "--all: every project's; archived ones are not offered).")


def pick(store: Store, project_root: str | None) -> Picked | None:
    """Show the picker (no event loop running: before the REPL starts, so its edits go
    through ``store``, opened for writing by the command line). With nothing to pick, a
    :class:`UsageError` says so instead (as ``--continue`` does)."""
    picker = SessionPicker(store.reader, StoreEdits(store), project_root)
    if not picker.chooser.first_rows():
        raise UsageError(nothing_to_resume(project_root))
    return picker.run()
