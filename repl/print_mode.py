"""Print mode (``harness -p PROMPT``): one user turn for scripts.

Only the final answer goes to stdout, as the model wrote it (plain text: no markdown
rendering, no colour); ``Session: ID``, tool lines and diagnostics go to stderr; the model's
reasoning goes nowhere. Written to a terminal, text from outside the harness (the answer,
tool output, server messages) has its control characters replaced
(:func:`~repl.interactive.sanitize.sanitize`); written to a pipe or a file it is exact.
Actions that need an approval are denied (the mode decides what needs one), with a hint on
stderr. SIGINT aborts the turn safely (exit 1 after recovery); SIGTERM, SIGHUP, SIGQUIT and
SIGUSR1 stop the run and the supervisor's shutdown saves the session; repeats are ignored
until that shutdown has ended (:mod:`repl.signals`).

With ``--output-format json`` or ``stream-json`` stdout holds JSON instead of the answer
(:mod:`repl.headless` describes the objects); stderr is the same.
"""

from __future__ import annotations

import sys
from typing import TextIO

import anyio

from actors.core.config import Settings
from actors.core.events import (
    ApprovalRequest,
    Event,
    Notice,
    SessionOpened,
    ToolCallFinished,
    ToolCallStarted,
)
from actors.runtime.supervisor import TurnResult
from actors.store import Store
from repl.headless import JsonOutput
from repl.interactive.render import preview, readable_arguments
from repl.interactive.sanitize import safe_for
from repl.session_run import Handler, open_session
from repl.signals import run_signals


def _handler(err: TextIO, mode: str, output: JsonOutput | None) -> Handler:
    """What print mode does with each event: diagnostics on stderr, the JSON objects, and
    every approval denied."""

    async def handle(event: Event) -> None:
        nonlocal mode
        _show(event, err)
        if output is not None:
            output.event(event)
        if isinstance(event, SessionOpened) and event.mode:
            mode = event.mode  # a resumed session's own
        if isinstance(event, ApprovalRequest):
            if not event.approved:  # (one the mode approved is only shown)
                print(_safe(f"[denied] {event.description} (print mode cannot ask; "
                            f"--mode {mode} requires approval)", err), file=err)
            async with event.reply:
                await event.reply.send(event.approved)

    return handle


def _safe(text: str, stream: TextIO) -> str:
    return safe_for(stream, text)


def _show(event: Event, err: TextIO) -> None:
    """Diagnostics on stderr; text and reasoning deltas are not shown (the answer is printed
    whole at the end, the reasoning never)."""
    if isinstance(event, SessionOpened):
        print(f"Session: {event.session_id}", file=err, flush=True)
    elif isinstance(event, ToolCallStarted):
        arguments = preview(readable_arguments(event.arguments), 200)
        print(_safe(f"[tool] {event.name}({arguments})", err), file=err)
    elif isinstance(event, ToolCallFinished) and not event.ok:
        print(_safe(f"[tool] {event.name}: {event.preview}", err), file=err)
    elif isinstance(event, Notice):
        print(_safe(f"harness: {event.text}", err), file=err)


async def run_print_mode(
    settings: Settings,
    store: Store,
    prompt: str,
    *,
    resume: str | None,
    continue_latest: bool,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
    output_format: str = "text",
) -> int:
    output = (JsonOutput(out, stream=output_format == "stream-json", model=settings.model)
              if output_format != "text" else None)
    result: TurnResult | None = None
    session_id = ""
    handle = _handler(err, settings.mode.value, output)
    async with run_signals() as signals:
        with signals.scope:  # SIGTERM, SIGHUP, SIGQUIT, SIGUSR1: stop; the shutdown saves
            async with open_session(settings, store, handle, resume=resume,
                                    continue_latest=continue_latest) as session:
                signals.on_interrupt = session.sup.abort  # SIGINT aborts the turn (else stops)
                session_id = session.sup.session_id
                result = await session.sup.run_turn(prompt)
    if result is None:  # the run was stopped before the turn ended
        by = signals.stopped_by.name if signals.stopped_by is not None else "a signal"
        result = TurnResult("interrupted", f"stopped by {by}")
    try:
        if output is not None:
            output.finish(result.outcome, result.text, result.usage, 0 if result.ok else 1)
        if result.ok:
            if output is None:
                print(_safe(result.text, out), file=out, flush=True)
            return 0
        label = "Interrupted" if result.outcome == "interrupted" else "Turn failed"
        line = f"harness: {label}: {result.text}"
        if session_id and resume is None and not continue_latest \
                and not await anyio.to_thread.run_sync(store.exists, session_id):
            line += f" (nothing was answered, so session {session_id} was not kept)"
        print(_safe(line, err), file=err, flush=True)
    except OSError:  # the terminal is gone (SIGHUP): the session is saved all the same
        pass
    return 1
