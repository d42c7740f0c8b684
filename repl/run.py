"""Running the agent: print mode (``-p``, or a prompt piped on stdin), the ACP agent
(``--acp``) or the interactive REPL.

The event loop is asyncio by default (prompt_toolkit needs it, and the ACP SDK); print mode
also runs on trio when ``AGENT_HARNESS_BACKEND=trio`` (the tests run both).
"""

from __future__ import annotations

import argparse
import os
import sys
from functools import partial
from typing import TYPE_CHECKING

from actors.core.config import Settings
from actors.core.errors import UsageError
from actors.model import base_url_problem
from repl import startup
from repl.lazy_store import LazyStore
from repl.resume_target import PICK

if TYPE_CHECKING:
    from actors.store import Store

# The supervisor, print mode, the REPL and anyio are imported when they run, so that the
# resume picker (``harness -r``) is on the screen before the rest of the harness has loaded,
# and a new session's first prompt before anyio (repl/interactive/start.py).


def _backend() -> str:
    backend = os.environ.get("AGENT_HARNESS_BACKEND", "asyncio")
    if backend not in ("asyncio", "trio"):
        raise UsageError(f"AGENT_HARNESS_BACKEND must be asyncio or trio, not {backend!r}.")
    return backend


def _prompt_from(args: argparse.Namespace) -> str | None:
    """The prompt of print mode (-p, or piped on stdin), None for the interactive prompt."""
    if args.initial is not None:
        if not sys.stdin.isatty():
            raise UsageError("harness PROMPT starts the interactive prompt, which needs a "
                             "terminal; use -p PROMPT for one answer.")
        return None
    if args.prompt == "-" or (args.prompt is None and not sys.stdin.isatty()):
        if args.resume == PICK:
            raise UsageError("--resume without an id opens a picker, which needs a terminal; "
                             "give the id (see --list-sessions).")
        text = sys.stdin.read()
        if not text.strip():
            raise UsageError("No prompt on stdin.")
        return text
    if args.prompt is not None and not args.prompt.strip():
        raise UsageError("The prompt given with -p is empty.")
    return args.prompt  # type: ignore[no-any-return]


def _picked(args: argparse.Namespace, settings: Settings, store: Store) -> str | None:
    """``--resume`` without an id: the session chosen in the picker (None: nothing chosen)."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError("--resume without an id opens a picker, which needs a terminal; "
                         "give the id (see --list-sessions).")
    from repl.interactive.picker import pick

    chosen = pick(store, None if args.all_projects else str(settings.sandbox_dir))
    if chosen is None:
        return None
    if chosen.forked_from:
        print(f"Forked {chosen.forked_from} into {chosen.session_id}.", flush=True)
    return chosen.session_id


async def compact_session(settings: Settings, store: Store, session_id: str) -> int:
    """``--compact ID``: resume the session, compact it once, save it."""
    from actors.runtime.supervisor import Supervisor

    async with Supervisor.open(settings, store, resume=session_id) as sup:
        result = await sup.compact()
    if result.applied or result.message.startswith("Nothing to compact"):
        print(result.message)
        return 0
    print(f"harness: {result.message}", file=sys.stderr)
    return 1


def run_agent(args: argparse.Namespace, settings: Settings, lazy_store: LazyStore) -> int:
    """Print mode, ``--acp``, ``--compact`` or the interactive REPL; the store is open already
    but for a new session's REPL, which opens it after its first prompt (repl/lazy_store.py)."""
    output_format = args.output_format or "text"
    if not settings.sandbox_dir.is_dir():
        raise UsageError(f"--sandbox-dir {settings.sandbox_dir} is not a directory.")
    problem = base_url_problem(settings.base_url)  # a URL nothing could answer at
    if problem is not None:
        raise UsageError(problem)
    if args.acp:
        from repl.acp.serve import run_acp

        startup.resume()
        return run_acp(settings, lazy_store.writable())
    if args.compact_id:
        import anyio

        startup.resume()
        return anyio.run(partial(compact_session, settings, lazy_store.writable(), args.compact_id),
                         backend=_backend())
    prompt = _prompt_from(args)
    if prompt is None and output_format != "text":
        raise UsageError("--output-format goes with -p PROMPT (or a prompt piped on stdin).")
    resume = args.resume
    if resume == PICK:
        startup.resume()  # the picker waits for the user
        resume = _picked(args, settings, lazy_store.writable())
        if resume is None:
            print("No session chosen.", flush=True)
            return 0
    if prompt is not None:
        import anyio

        from repl.print_mode import run_print_mode

        startup.resume()
        return anyio.run(
            partial(run_print_mode, settings, lazy_store.writable(), prompt, resume=resume,
                    continue_latest=args.continue_, output_format=output_format),
            backend=_backend(),
        )
    from repl.project_config import ask_about_project

    ask_about_project(settings)  # before the session opens: its hooks run from its start
    from repl.interactive import cbreak

    # From here to the end keys typed while nothing reads the terminal (the REPL's imports,
    # a resume's greeting) wait for the prompt, Ctrl-D included (repl/interactive/cbreak.py).
    with cbreak.held(sys.stdin.fileno()):
        from repl.interactive.start import run_repl

        return run_repl(settings, lazy_store, resume=resume, continue_latest=args.continue_,
                        first=args.initial)
