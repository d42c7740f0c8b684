"""The environment of the processes tools start: the harness's own, minus its secrets.

run_bash commands (and the grep worker) do not need the model endpoint's key or the session
store's address, and a command the model wrote should not be handed them: every variable the
one rule of :mod:`actors.core.secrets` names (``OPENAI_*``: the API key, base URL,
organisation and project; ``AGENT_HARNESS_*``: the store URL, which may hold a PostgreSQL
password, the memory directory, the backend) is left out. Everything else is passed on,
because builds and tests need it (``PATH``, ``HOME``, proxies, the project's own variables,
``PG*`` for the project's databases). What a child can still read of the harness is in
docs/security.md; run_bash is not a sandbox.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from actors.core.secrets import is_secret


def tool_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environ`` (default ``os.environ``) without the harness's secrets."""
    source = os.environ if environ is None else environ
    return {name: value for name, value in source.items() if not is_secret(name)}
