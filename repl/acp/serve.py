"""``harness --acp``: the agent served on stdin and stdout until the client closes stdin.

The protocol takes stdin and stdout for itself (:func:`repl.acp.transport.claim_stdio`);
everything else the harness says goes to stderr, one line each (``harness: …``), tracebacks
included (a library's error is its type and message). The run is on asyncio (the SDK's
loop); its signals are the print mode's (:mod:`repl.signals`): SIGTERM, SIGHUP, SIGQUIT,
SIGUSR1 and SIGINT stop the agent.

The end, however it comes (stdin closed, a signal): every open session's turn is aborted
with the safe recovery of Ctrl-C, each supervisor's shutdown runs (shielded: saved, leases
released), then the connection closes. The exit status is 0 (1 when a signal stopped it).
"""

from __future__ import annotations

import logging
import sys
from functools import partial
from typing import cast

import anyio
from acp import Agent
from acp.agent.connection import AgentSideConnection

from actors.core.config import Settings
from actors.core.errors import UsageError
from actors.store import Store
from repl.acp.agent import HarnessAgent
from repl.acp.transport import StdioTransport, claim_stdio
from repl.signals import run_signals

CLOSE_SECONDS = 5


class _OneLine(logging.Formatter):
    """``harness: message``, an exception as its type and message, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            text += f" ({type(exc).__name__}: {exc})"
        return "harness: " + " ".join(text.split())


def _log_to_stderr() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_OneLine())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    logging.getLogger("harness").setLevel(logging.INFO)


async def _serve(settings: Settings, store: Store, protocol_in: int, protocol_out: int) -> int:
    async with run_signals() as signals:
        with signals.scope:
            try:
                transport = await StdioTransport.open(protocol_in, protocol_out)
            except (OSError, ValueError) as exc:
                raise UsageError(f"--acp needs the editor's stdin and stdout ({exc}).") from None
            async with anyio.create_task_group() as sessions:
                agent = HarnessAgent(settings, store, sessions)
                transport.at_end = agent.abort_all
                # The methods the harness does not serve are left out: the SDK answers them
                # "method not found" (its Agent protocol lists every method).
                connection = AgentSideConnection(cast(Agent, agent), transport,
                                                 listening=False, use_unstable_protocol=True)
                try:
                    await connection.listen()  # until stdin ends
                finally:
                    with anyio.CancelScope(shield=True):
                        await agent.close_all()  # each session saved, its lease released
                        with anyio.move_on_after(CLOSE_SECONDS):
                            await connection.close()  # the last answers written first
    return 1 if signals.stopping else 0


def run_acp(settings: Settings, store: Store) -> int:
    """Serve ACP on stdin and stdout (see the module doc)."""
    try:
        protocol_in, protocol_out = claim_stdio()
    except OSError as exc:  # no stdin or stdout at all
        raise UsageError(f"--acp needs the editor's stdin and stdout ({exc.strerror}).") \
            from None
    _log_to_stderr()
    return anyio.run(partial(_serve, settings, store, protocol_in, protocol_out),
                     backend="asyncio")
