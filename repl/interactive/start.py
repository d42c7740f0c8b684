"""The interactive run's start: a new session's greeting and first prompt come before the
rest of the REPL is loaded.

For a new session (``harness`` alone) the greeting is printed and the first prompt drawn
with prompt_toolkit on asyncio's loop, and only then are the REPL's runtime side
(:mod:`repl.interactive.app`, with anyio, the events and the renderer) imported and the
session's store and supervisor opened; the prompt reads meanwhile, and what was typed
reaches it (docs/decisions.md, "A new session's first prompt is drawn before anyio is
imported"). A resume, ``-c`` and ``harness PROMPT`` load the REPL first: their greeting
needs the session open (where it was left), or a turn runs before any prompt.

From the moment the loop runs, the run's signals are held for :func:`repl.signals.run_signals`
(:func:`repl.signals.held`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys

from actors.core.config import Settings
from actors.core.ids import new_session_id
from repl.interactive.greeting import greet
from repl.interactive.prompt import MainPrompt, create_history_file
from repl.lazy_store import LazyStore
from repl.signals import held


async def _run(
    settings: Settings,
    lazy_store: LazyStore,
    resume: str | None,
    continue_latest: bool,
    first: str | None,
) -> int:
    early = held()
    if resume is not None or continue_latest or first is not None:
        from repl.interactive.app import main

        return await main(settings, lazy_store, early, resume=resume,
                          continue_latest=continue_latest, first=first)
    prompt = MainPrompt(settings, lazy_store)
    session_id = prompt.view.session_id = new_session_id()
    greet(settings, session_id)
    reading = await prompt.start_reading()
    try:
        from repl.interactive.app import FirstPrompt, main

        return await main(settings, lazy_store, early, resume=None, continue_latest=False,
                          first=None, new=FirstPrompt(session_id, prompt, reading))
    finally:
        if not reading.done():  # the run ended before the prompt was read (a signal)
            reading.cancel()
            await asyncio.wait((reading,))
        if not reading.cancelled():
            reading.exception()  # retrieved: its EOFError or KeyboardInterrupt is no news


def run_repl(
    settings: Settings,
    lazy_store: LazyStore,
    *,
    resume: str | None,
    continue_latest: bool,
    first: str | None = None,
) -> int:
    """The interactive prompt; ``first`` is sent as the first message (``harness PROMPT``).
    The store is opened by the command line, or (a new session) here after the first prompt."""
    if not sys.stdin.isatty():  # pragma: no cover - print mode handles pipes
        raise SystemExit("harness: the interactive prompt needs a terminal; use -p")
    create_history_file(settings.memory_dir)
    # The endpoint is checked in the background while the prompt is shown: its warnings
    # (not running, model not pulled, context too small) arrive as notices. After the first
    # answer, the model names the session in the background.
    settings = dataclasses.replace(settings, preflight=True, auto_title=True)
    return asyncio.run(_run(settings, lazy_store, resume, continue_latest, first))
