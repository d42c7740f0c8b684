"""Running the agent: print mode (``-p``, or a prompt piped on stdin) or the interactive REPL.

The event loop is asyncio by default (prompt_toolkit needs it); print mode also runs on trio
when ``AGENT_HARNESS_BACKEND=trio`` (the tests run both).
"""

from __future__ import annotations

import argparse
import os
import sys
from functools import partial

import anyio

from actors.core.config import Settings
from actors.core.errors import UsageError
from actors.model import base_url_problem
from actors.runtime.supervisor import Supervisor
from actors.store import Store
from repl.print_mode import run_print_mode


def _backend() -> str:
    backend = os.environ.get("AGENT_HARNESS_BACKEND", "asyncio")
    if backend not in ("asyncio", "trio"):
        raise UsageError(f"AGENT_HARNESS_BACKEND must be asyncio or trio, not {backend!r}.")
    return backend


def _prompt_from(args: argparse.Namespace) -> str | None:
    if args.prompt == "-" or (args.prompt is None and not sys.stdin.isatty()):
        text = sys.stdin.read()
        if not text.strip():
            raise UsageError("No prompt on stdin.")
        return text
    if args.prompt is not None and not args.prompt.strip():
        raise UsageError("The prompt given with -p is empty.")
    return args.prompt  # type: ignore[no-any-return]


async def compact_session(settings: Settings, store: Store, session_id: str) -> int:
    """``--compact ID``: resume the session, compact it once, save it."""
    async with Supervisor.open(settings, store, resume=session_id) as sup:
        result = await sup.compact()
    if result.applied or result.message.startswith("Nothing to compact"):
        print(result.message)
        return 0
    print(f"harness: {result.message}", file=sys.stderr)
    return 1


def run_agent(args: argparse.Namespace, settings: Settings, store: Store) -> int:
    if not settings.sandbox_dir.is_dir():
        raise UsageError(f"--sandbox-dir {settings.sandbox_dir} is not a directory.")
    problem = base_url_problem(settings.base_url)  # a URL nothing could answer at
    if problem is not None:
        raise UsageError(problem)
    if args.compact_id:
        return anyio.run(partial(compact_session, settings, store, args.compact_id),
                         backend=_backend())
    prompt = _prompt_from(args)
    if prompt is not None:
        return anyio.run(
            partial(run_print_mode, settings, store, prompt, resume=args.resume,
                    continue_latest=args.continue_),
            backend=_backend(),
        )
    from repl.interactive.app import run_repl

    return run_repl(settings, store, resume=args.resume, continue_latest=args.continue_)
