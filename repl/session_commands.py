"""The session commands of the command line (no model needed): list, search, info, rename,
fork, archive, unarchive, delete, export and import.

Listings are this project's unless ``--all`` (see :mod:`repl.listing`); ids may be any
unique prefix (the command line resolves them before calling these).

Each function prints to stdout and returns the exit status; user mistakes raise
:class:`actors.core.errors.UsageError`, which the CLI turns into one line on stderr and status 2.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from actors.core.budget import UsageTotals
from actors.core.errors import StorageError, UsageError
from actors.core.previews import clean_title, one_line
from actors.store import (
    SessionInfo,
    Store,
    context_problem,
    export_session,
    is_sqlite_url,
    open_store,
    to_markdown,
)
from repl import listing
from repl.exchanges import exchange_lines
from repl.interactive.sanitize import json_text

INFO_RECENT = 8  # messages ``--info`` ends with


def list_sessions(
    store: Store,
    *,
    include_archived: bool,
    as_json: bool,
    project_root: str | None = None,
    out: TextIO | None = None,
) -> int:
    """``--list-sessions``: this project's sessions (every project's when ``project_root``
    is None, with a project column), most recent first; sessions nobody typed in are left
    out."""
    out = out or sys.stdout
    sessions = store.list_sessions(include_archived=include_archived, project_root=project_root,
                                   include_empty=False)
    if as_json:
        out.write(json_text(sessions, indent=2) + "\n")
    elif not sessions:
        where = " for this project (--all lists every project's)" if project_root else ""
        print(f"No saved sessions{where}.", file=out)
    else:
        lines = listing.table(sessions, with_project=project_root is None,
                              width=listing.terminal_width())
        print("\n".join(lines), file=out)
    return 0


def search_sessions(
    store: Store,
    query: str,
    *,
    include_archived: bool,
    as_json: bool,
    project_root: str | None = None,
    out: TextIO | None = None,
) -> int:
    out = out or sys.stdout
    if not query.strip():
        raise UsageError("--search needs some words to look for.")
    results = store.search_sessions(query, include_archived=include_archived,
                                    project_root=project_root)
    if as_json:
        out.write(json_text(results, indent=2) + "\n")
    elif not results:
        where = " in this project (--all searches every project)" if project_root else ""
        print(f"No session matches {query!r}{where}.", file=out)
    else:
        lines = listing.table(results, with_project=project_root is None,
                              width=listing.terminal_width())
        print("\n".join(lines), file=out)
    return 0


def usage_line(state: dict[str, Any]) -> str:
    """This session's own usage, and what a fork inherited, on one line."""
    usage = UsageTotals.from_state(state)
    line = (
        f"{usage.calls} model calls, {usage.total_tokens_in} tokens in, "
        f"{usage.total_tokens_out} out, ${usage.total_cost_usd:.4f}; "
        f"{state.get('tool_calls', 0)} tool calls"
    )
    if usage.inherited is not None:
        inherited = usage.inherited
        line += (f" (inherited from before the fork: {inherited.calls} model calls, "
                 f"${inherited.cost_usd:.4f})")
    return line


def origin_line(origin: dict[str, Any]) -> str:
    """Where an imported session came from, on one line: the format, the file, the peer's
    own id, version and model, its usage there, and what the import left out."""
    parts = [f"{origin.get('label', origin.get('format', '?'))} {origin.get('path', '')}"]
    facts = [f"session {origin['session_id']}" if origin.get("session_id") else ""]
    facts += [f"version {origin['version']}" if origin.get("version") else "",
              f"model {origin['model']}" if origin.get("model") else ""]
    usage = origin.get("usage")
    if isinstance(usage, dict) and usage:
        facts.append(f"{usage.get('input', 0)} tokens in, {usage.get('output', 0)} out there")
    notes = origin.get("notes")
    if isinstance(notes, list):
        facts += [str(n) for n in notes]
    detail = "; ".join(f for f in facts if f)
    return one_line(parts[0] + (f" ({detail})" if detail else ""), 600)


HOOKS_SHOWN = 3  # hook outcomes --info and \\info show


def describe(
    info: SessionInfo, recent: Sequence[tuple[int | None, dict[str, Any]]] = ()
) -> list[str]:
    """The lines of ``--info`` and ``\\info``: identity, lineage, counts, compactions, usage
    and, when given, the last messages numbered as ``--fork ID --at N`` takes them."""
    lines = [
        f"Session:      {info.id}",
        f"Title:        {info.title or '(none)'}"
        + (f"  ({info.title_source})" if info.title_source in ("provisional", "model") else ""),
        f"Status:       {info.status}" + ("  (archived)" if info.archived else ""),
        f"Created:      {listing.when(info.created_at)}",
        f"Updated:      {listing.when(info.updated_at)}",
        f"Project:      {info.project_root or '(unknown)'}",
    ]
    if info.parent_id:
        at = f" at message {info.fork_point}" if info.fork_point else " (a whole copy)"
        lines.append(f"Forked from:  {info.parent_id}{at}")
    lines.append(
        f"Messages:     {info.context_messages} in context, "
        f"{info.transcript_messages} in transcript (numbered 1 to {info.transcript_messages}), "
        f"{info.user_messages} typed"
    )
    compactions = f"Compactions:  {len(info.compactions)}"
    if info.compactions:
        last = info.compactions[-1]
        compactions += (
            f" (last: {last['before_tokens']} -> {last['after_tokens']} tokens, "
            f"{listing.when(str(last['at']))})"
        )
    lines.append(compactions)
    lines.append(f"Usage:        {usage_line(info.state)}")
    origin = info.state.get("origin")
    if isinstance(origin, dict):
        lines.append(f"Imported:     {origin_line(origin)}")
    lines += _configured(info.state)
    if info.summary:
        lines.append(f"Summary:      {one_line(info.summary, 300)}")
    if recent:
        lines.append("Last messages:")
        lines += exchange_lines(recent, numbers=True)
    return lines


def _configured(state: dict[str, Any]) -> list[str]:
    """The AGENTS.md files the session's system prompt carries and the last outcomes of its
    hooks, as its state records them (checked: a state is read from the store)."""
    lines = []
    files = [f for f in state.get("instructions") or () if isinstance(f, dict)]
    if files:
        shown = []
        for item in files:
            chars, omitted = item.get("chars"), item.get("omitted")
            about = f"{chars:,} characters" if isinstance(chars, int) else "?"
            if isinstance(chars, int) and isinstance(omitted, int) and omitted:
                about += f", {chars - omitted:,} of them in the prompt"
            shown.append(f"{one_line(str(item.get('path', '?')), 80)} ({about})")
        lines.append(f"Instructions: {', '.join(shown)}")
    hooks = [h for h in state.get("hooks") or () if isinstance(h, dict)]
    if hooks:
        lines.append(f"Hooks:        {len(hooks)} outcome{'s' if len(hooks) != 1 else ''} "
                     "kept; the last:")
        for hook in hooks[-HOOKS_SHOWN:]:
            code = f" (exit {hook['exit_code']})" if isinstance(hook.get("exit_code"), int) else ""
            said = f": {one_line(str(hook['said']), 120)}" if hook.get("said") else ""
            lines.append(f"  {listing.when(str(hook.get('at', '')))} {hook.get('event', '?')} "
                         f"{hook.get('outcome', '?')}{code} "
                         f"`{one_line(str(hook.get('command', '')), 60)}`{said}")
    return lines


def show_info(
    store: Store, session_id: str, *, as_json: bool, out: TextIO | None = None
) -> int:
    out = out or sys.stdout
    info = store.info(session_id)
    if as_json:
        out.write(json_text(info.__dict__, indent=2) + "\n")
    else:
        recent = store.recent_messages(session_id, INFO_RECENT)
        print("\n".join(describe(info, recent)), file=out)
    return 0


def rename(store: Store, session_id: str, title: str, out: TextIO | None = None) -> int:
    cleaned = clean_title(title)
    if not cleaned:
        raise UsageError("The title is empty.")
    store.update(session_id, title=cleaned)
    print(f"Renamed {session_id}: {cleaned}", file=out or sys.stdout)
    return 0


def fork(
    store: Store, session_id: str, at: int | None = None, *, as_json: bool = False,
    out: TextIO | None = None,
) -> int:
    """``--fork ID [--at N]``: what was made (``--json``: its id, parent and fork point)."""
    out = out or sys.stdout
    new_id = store.fork(session_id, at)
    info = store.info(new_id)
    if as_json:
        out.write(json_text({"id": new_id, "parent_id": session_id,
                             "fork_point": info.fork_point}) + "\n")
        return 0
    if at is None:
        made = f"Forked {session_id} into {new_id} (a whole copy)"
    else:
        made = (f"Forked {session_id} at message {info.fork_point} into {new_id} (its "
                f"messages 1 to {info.fork_point})")
        if info.fork_point != at:
            made += (f"; message {at} is a tool call, so the fork keeps its results too, up "
                     f"to message {info.fork_point}")
    print(f"{made}. harness -r {new_id} resumes it.", file=out)
    return 0


def set_archived(
    store: Store, session_id: str, archived: bool, out: TextIO | None = None
) -> int:
    out = out or sys.stdout
    store.update(session_id, archived=archived)
    print(f"{'Archived' if archived else 'Unarchived'} {session_id}.", file=out)
    return 0


def delete(store: Store, session_id: str, *, yes: bool, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    if not yes:
        raise UsageError(
            f"Deleting session '{session_id}' cannot be undone; add --yes to confirm."
        )
    store.delete(session_id)
    print(f"Deleted session {session_id}.", file=out)
    return 0


def export(
    store: Store, session_id: str, *, fmt: str, out: TextIO | None = None
) -> int:
    out = out or sys.stdout
    if fmt == "atif":
        from actors.store import to_atif

        out.write(json_text(to_atif(store, session_id), indent=2) + "\n")
        return 0
    record = export_session(store, session_id)
    if fmt == "markdown":
        out.write(to_markdown(record))
    else:
        out.write(json_text(record, indent=2) + "\n")
    return 0


def import_(
    store: Store, paths: Sequence[str], out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Import files and directories (the harness's records and other agents' sessions, told
    apart by content: :mod:`actors.store.peers`); report each, status 2 if any could not be
    imported."""
    from actors.store.peers import import_sessions

    out = out or sys.stdout
    err = err or sys.stderr
    walked = import_sessions(store, *paths)
    failed = 0
    for result in walked.results:
        if result.error:
            failed += 1
            print(f"harness: skipped {result.error}", file=err)
        elif result.left_out:
            print(f"Left out {result.source}: {result.left_out}", file=out)
        elif result.skipped:
            print(f"Already present: {result.session_id} ({result.source})", file=out)
        else:
            what = "" if result.label == "session record" else (
                f": {result.label}, {result.messages} messages"
                + "".join(f"; {note}" for note in result.notes))
            print(f"Imported {result.session_id} ({result.source}){what}", file=out)
    if walked.passed_over:
        print(f"Passed over {walked.passed_over} file(s) that are not sessions.", file=out)
    return 2 if failed else 0


def doctor(
    memory_dir: Path, *, repair: bool, store_url: str | None = None, out: TextIO | None = None
) -> int:
    """``--doctor [--repair]``: 0 when nothing serious is (left) wrong, else 1.

    A busy, locked or live store is never moved aside: a repair that must replace the file
    runs only when no other process has the store open (see actors/store/sqlite/doctor.py).
    """
    out = out or sys.stdout
    from actors.store.sqlite import doctor as checks

    if store_url is not None and not is_sqlite_url(store_url):
        return doctor_shared(memory_dir, store_url, repair=repair, out=out)

    try:
        store = checks.open_for_doctor(memory_dir)
    except StorageError as exc:
        print(f"Problems:\n  database: {exc}", file=out)
        left_alone = checks.cannot_open(exc)
        if left_alone is not None:
            print(left_alone, file=out)
            return 1
        if not repair:
            print("Run `harness --doctor --repair` to salvage what can be read into a new "
                  "file.", file=out)
            return 1
        swapped = checks.salvage_and_swap(memory_dir)
        print("Repairs:", file=out)
        print("\n".join(f"  {line}" for line in swapped.lines), file=out)
        return 0 if swapped.ok else 1
    with store:
        for warning in store.import_warnings:
            print(f"Note: {warning}", file=out)
        report = checks.examine(store)
        print("\n".join(checks.render(store, report)), file=out)
        if not repair:
            if report.serious:
                print("Run `harness --doctor --repair` to rebuild the indexes, salvage damaged "
                      "pages and copy damaged sessions into new ones.", file=out)
            return 1 if report.serious else 0
        repairs = checks.repair_in_place(store, report)
    lines, ok = repairs.done, not repairs.failed
    if repairs.needs_salvage:
        swapped = checks.salvage_and_swap(memory_dir)
        lines += swapped.lines
        ok = ok and swapped.ok
    if not lines and report.serious:  # a finding no repair step answers: never "nothing"
        lines, ok = [f"Not repaired: {f.subject}: {f.problem}" for f in report.serious], False
    print("Repairs:", file=out)
    for line in lines or ["Nothing to repair."]:
        print(f"  {line}", file=out)
    return 0 if ok else 1


def doctor_shared(memory_dir: Path, url: str, *, repair: bool, out: TextIO | None = None) -> int:
    """``--doctor`` with a PostgreSQL store: what can be checked from here (the connection,
    the schema, the sessions and who runs them, every saved context's tool-call ids and
    pairing); the page-level checks are the server's. 1 when a context is not sendable."""
    out = out or sys.stdout
    if repair:
        raise UsageError(
            "--doctor --repair works on the SQLite store only; PostgreSQL checks and repairs "
            "its own tables (amcheck, REINDEX, backups)."
        )
    with open_store(memory_dir, url) as store:
        sessions = store.list_sessions(include_archived=True)
        running = [s["id"] for s in sessions if store.is_running_elsewhere(s["id"])]
        unclean = [s["id"] for s in sessions
                   if s["status"] == "active" and s["id"] not in running]
        unsendable = []
        for item in sessions:
            if item["id"] in running:
                continue
            context = store.load_context(item["id"], repaired=False)
            problem = context_problem(context, crashed=item["id"] in unclean)
            if problem is not None:
                unsendable.append(f"  {item['id']}: {problem}")
        lines = [
            f"Store:        {store.location}",
            "Connection:   ok (schema up to date)",
            f"Sessions:     {len(sessions)}, {len(running)} running in other processes",
        ]
        lines += [f"  {sid}: was not closed cleanly (a crash); it is recovered on resume"
                  for sid in unclean]
        if unsendable:
            lines += ["Problems:", *unsendable]
        lines.append(
            "The integrity, search-index and per-session checks of --doctor are for the "
            "SQLite store; PostgreSQL checks its own data (amcheck, REINDEX)."
        )
    print("\n".join(lines), file=out)
    return 1 if unsendable else 0
