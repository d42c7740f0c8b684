"""The model client actor: chat completions against OpenAI-compatible endpoints (ollama,
llama.cpp, vLLM, ...), with their real streaming dialects, retries and clear failures.

Modules, one idea each: ``_sse`` (server-sent events), ``_reasoning`` (thinking apart from the
answer), ``_assembly`` (chunks back into one message), ``_classify`` (every failure as one
:class:`~actors.core.errors.ModelError`), ``_retry`` (what is tried again), ``_endpoint``
(the URL and the server behind it), ``_timeouts`` (how long the server may keep a request
waiting), ``_wire`` (one request on the wire), ``client`` (the actor), ``doctor`` (the
endpoint's checks for ``--doctor``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from actors.core.lazy import names_from

if TYPE_CHECKING:
    from actors.model._endpoint import base_url_problem
    from actors.model._protocol import (
        CUT_ANSWER_NOTICE,
        CUT_CALL_RESULT,
        CUT_CALLS_REASON,
        ModelOutcome,
        ModelRequest,
    )
    from actors.model._retry import RetryPolicy
    from actors.model.client import ModelClient

# The names are imported when first used (PEP 562): the command line checks the endpoint's
# URL (``base_url_problem``) before the first prompt, and the client with its stream
# assembly and failure classes is imported with the runtime, after it (docs/decisions.md).
_WHERE = {
    "base_url_problem": "_endpoint",
    "CUT_ANSWER_NOTICE": "_protocol", "CUT_CALL_RESULT": "_protocol",
    "CUT_CALLS_REASON": "_protocol", "ModelOutcome": "_protocol", "ModelRequest": "_protocol",
    "RetryPolicy": "_retry",
    "ModelClient": "client",
}


__getattr__ = names_from(__name__, globals(), _WHERE)


__all__ = [
    "CUT_ANSWER_NOTICE",
    "CUT_CALLS_REASON",
    "CUT_CALL_RESULT",
    "ModelClient",
    "ModelOutcome",
    "ModelRequest",
    "RetryPolicy",
    "base_url_problem",
]
