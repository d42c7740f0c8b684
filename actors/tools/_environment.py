"""The environment of the processes tools start: the harness's own, minus its secrets.

run_bash commands (and the grep worker) do not need the model endpoint's key or the session
store's address, and a command the model wrote should not be handed them: every variable
named ``OPENAI_*`` (the API key, base URL, organisation and project) and ``AGENT_HARNESS_*``
(the store URL, which may hold a PostgreSQL password, the memory directory, the backend) is
left out. Everything else is passed on, because builds and tests need it (``PATH``, ``HOME``,
proxies, the project's own variables, ``PG*`` for the project's databases). This hides the
harness's secrets from casual use; it is not a sandbox (see docs/security.md).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

SECRET_PREFIXES = ("OPENAI_", "AGENT_HARNESS_")


def is_secret(name: str) -> bool:
    return name.upper().startswith(SECRET_PREFIXES)


def tool_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environ`` (default ``os.environ``) without the harness's secrets."""
    source = os.environ if environ is None else environ
    return {name: value for name, value in source.items() if not is_secret(name)}
