"""What the endpoint can tell before (and just after) the first answer: is it reachable, does
it have the model, and how long a context will it really use.

- ``/v1/models`` lists the models (ollama names them ``gemma4:latest``); its ``owned_by``
  says which server answers, and vLLM adds ``max_model_len``.
- ollama: the context it uses is the ``context_length`` of the loaded model in ``/api/ps``;
  before the model is loaded, a ``num_ctx`` parameter in ``/api/show`` (its Modelfile);
  otherwise the server's default (``OLLAMA_CONTEXT_LENGTH``, else 4096, or 4k/32k/256k by
  VRAM in recent versions), which no client can read: it is learned from ``/api/ps`` after
  the first answer. ollama drops the oldest messages of a longer prompt without a word.
- llama.cpp: ``n_ctx`` in ``/props`` (per slot); longer prompts are refused.

Every look-up is bounded and may fail quietly (then nothing is claimed). The warnings say
how to raise the server's context, or what to pass as ``--max-context-tokens``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import anyio

from actors.model._endpoint import Endpoint, root_url

if TYPE_CHECKING:
    from actors.model._connection import Connection

LOOKUP_SECONDS = 3
_NUM_CTX = re.compile(r"^\s*num_ctx\s+(\d+)", re.M)


async def get_json(client: Connection, url: str, body: Any = None) -> Any:
    """GET (or POST ``body`` to) an absolute or relative URL; None if that fails."""
    with anyio.move_on_after(LOOKUP_SECONDS):
        try:
            return (await client.fetch(url, body)).json()
        except Exception:  # no such endpoint, not JSON, refused: nothing learned
            return None
    return None


def _base(name: str) -> str:
    return name if ":" in name else f"{name}:latest"


async def ollama_context(client: Connection, endpoint: Endpoint) -> bool:
    """Learn the context ollama uses for the model (``/api/ps``, else ``/api/show``); True if
    it is known now."""
    root = root_url(endpoint.base_url)
    running = await get_json(client, f"{root}/api/ps")
    for item in (running or {}).get("models") or [] if isinstance(running, dict) else []:
        if isinstance(item, dict) and _base(endpoint.model) in (
                _base(str(item.get("name", ""))), _base(str(item.get("model", "")))):
            length = item.get("context_length")
            if isinstance(length, int) and length > 0:
                endpoint.context_length = length
                endpoint.context_source = "loaded now, per 'ollama ps'"
                return True
    shown = await get_json(client, f"{root}/api/show", {"model": endpoint.model})
    parameters = shown.get("parameters") if isinstance(shown, dict) else None
    match = _NUM_CTX.search(parameters) if isinstance(parameters, str) else None
    if match:
        endpoint.context_length = int(match.group(1))
        endpoint.context_source = "num_ctx in its Modelfile"
        return True
    return False


async def llamacpp_context(client: Connection, endpoint: Endpoint) -> bool:
    props = await get_json(client, f"{root_url(endpoint.base_url)}/props")
    settings = props.get("default_generation_settings") if isinstance(props, dict) else None
    n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
    if isinstance(n_ctx, int) and n_ctx > 0:
        endpoint.context_length = n_ctx
        endpoint.context_source = "n_ctx in /props"
        return True
    return False


def suggested_context(budget: int) -> int:
    size = 8192
    while size < budget:
        size *= 2
    return size


def context_warning(endpoint: Endpoint, budget: int) -> str | None:
    """A warning when the server's context is smaller than ``--max-context-tokens``."""
    length = endpoint.context_length
    if length is None or length >= budget:
        return None
    want = suggested_context(budget)
    where = f"({endpoint.context_source})" if endpoint.context_source else ""
    if endpoint.server == "ollama":
        return (f"ollama runs {endpoint.model} with a {length:,}-token context {where}, "
                f"below --max-context-tokens {budget:,}: past it ollama silently drops the "
                f"oldest messages. Start ollama with 'OLLAMA_CONTEXT_LENGTH={want} ollama "
                f"serve' (or PARAMETER num_ctx {want} in a Modelfile), or pass "
                f"--max-context-tokens {length}.")
    if endpoint.server == "vllm":
        return (f"vLLM serves {endpoint.model} with max_model_len {length:,} {where}, below "
                f"--max-context-tokens {budget:,}: longer requests are refused. Start vLLM "
                f"with --max-model-len {want}, or pass --max-context-tokens {length}.")
    if endpoint.server == "llama.cpp":
        return (f"llama-server runs with a {length:,}-token context {where}, below "
                f"--max-context-tokens {budget:,}: longer requests are refused. Start it with "
                f"-c {want}, or pass --max-context-tokens {length}.")
    return (f"The server's context is {length:,} tokens {where}, below --max-context-tokens "
            f"{budget:,}. Pass --max-context-tokens {length}.")


def truncation_warning(endpoint: Endpoint, reported: int, estimated: int) -> str:
    known = (f" (it holds {endpoint.context_length:,} tokens)"
             if endpoint.context_length else "")
    how = ("start ollama with a larger OLLAMA_CONTEXT_LENGTH" if endpoint.server == "ollama"
           else "raise the server's context length")
    return (f"The server counted {reported:,} prompt tokens for a request the harness "
            f"estimates at ~{estimated:,}: it probably cut the oldest messages to fit its "
            f"context{known}, so the model no longer sees the start of the conversation. "
            f"To keep everything, {how}, or lower --max-context-tokens to what it holds.")
