"""The model client actor: chat completions against OpenAI-compatible endpoints (ollama,
llama.cpp, vLLM, ...), with their real streaming dialects, retries and clear failures.

Modules, one idea each: ``_sse`` (server-sent events), ``_reasoning`` (thinking apart from the
answer), ``_assembly`` (chunks back into one message), ``_classify`` (every failure as one
:class:`~actors.core.errors.ModelError`), ``_retry`` (what is tried again), ``_endpoint``
(the URL and the server behind it), ``_wire`` (one request on the wire), ``client`` (the
actor).
"""

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
