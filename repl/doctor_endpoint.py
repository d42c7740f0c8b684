"""The model endpoint's part of ``--doctor`` and the REPL's ``\\doctor``: one line per check
(:mod:`actors.model.doctor`: reachable, the model, tools, the context against the budget),
each with its fix. Informational: ``--doctor``'s exit status stays the store's (0: nothing
to repair), as scripts read it."""

from __future__ import annotations

import sys
from typing import TextIO

from actors.core.config import Settings
from repl.interactive.sanitize import sanitize


async def endpoint_report(settings: Settings) -> list[str]:
    """The lines of the endpoint's checks (bounded in time; never raises for what the
    endpoint does). Cancellation: the checks stop."""
    from actors.model.doctor import diagnose

    findings = await diagnose(base_url=settings.base_url, api_key=settings.api_key,
                              model=settings.model, budget=settings.max_context_tokens)
    return [sanitize(f"Model endpoint: {settings.model} at {settings.base_url}"),
            *(sanitize(finding.line()) for finding in findings)]


def doctor_endpoint(settings: Settings, out: TextIO = sys.stdout) -> None:
    """``--doctor``'s endpoint lines, printed."""
    import anyio

    print("\n".join(anyio.run(endpoint_report, settings)), file=out, flush=True)
