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

from actors.model._endpoint import Endpoint, markup_candidates, root_url, single_tokens

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
    """Learn what llama.cpp's ``/props`` tells (:meth:`Endpoint.learn_from_props`); True if
    the context is known now."""
    root = root_url(endpoint.base_url)
    props = await get_json(client, f"{root}/props")
    endpoint.learn_from_props(props)
    candidates = markup_candidates(props) if isinstance(props, dict) else []
    if candidates:  # which of them the model has as tokens (llama.cpp b4000 and later)
        tokenized = await get_json(client, f"{root}/tokenize", {
            "content": "\n".join(candidates), "parse_special": True, "with_pieces": True})
        endpoint.control_tokens = single_tokens(candidates, tokenized)
    return endpoint.context_length is not None


def suggested_context(budget: int) -> int:
    size = 8192
    while size < budget:
        size *= 2
    return size


COMPACT_PROMPT = "the compact prompt is used when the context is 8,192 tokens or less"
CONTEXT_FULL_SLACK = 4  # prompt + answer this close to the context: the context ended it
ROOM = 1.5  # a budget helps only if it holds the fixed prompt and half as much again


def raise_context(endpoint: Endpoint, want: int) -> str:
    """The server's own way to give a request ``want`` tokens of context (a sentence without
    its full stop). llama.cpp with several slots: ``-np 1``, since ``-c`` is what each slot
    gets only with the shared cache (the default), and ``-c`` divided among them with
    ``--no-kv-unified``; /props tells the slots, not which of the two it is."""
    if endpoint.server == "ollama":
        return (f"Start ollama with 'OLLAMA_CONTEXT_LENGTH={want} ollama serve' (or PARAMETER "
                f"num_ctx {want} in a Modelfile)")
    if endpoint.server == "vllm":
        return f"Start vLLM with --max-model-len {want}"
    if endpoint.server == "llama.cpp":
        slots = endpoint.slots or 1
        if slots > 1:
            return (f"Start llama-server with -c {want} -np 1 (with --no-kv-unified each of "
                    f"its {slots} slots gets -c / {slots})")
        return f"Start llama-server with -c {want}"
    return f"Raise the server's context to {want:,} tokens"


def _gives(endpoint: Endpoint, length: int) -> str:
    """``length`` as the context a request gets, and where that was learned."""
    source = endpoint.context_source
    if endpoint.server == "llama.cpp" and (endpoint.slots or 1) > 1:
        source = f"{source}; {endpoint.slots} slots" if source else f"{endpoint.slots} slots"
    where = f" ({source})" if source else ""
    if endpoint.server == "ollama":
        return f"ollama runs {endpoint.model} with a {length:,}-token context{where}"
    if endpoint.server == "vllm":
        return f"vLLM serves {endpoint.model} with max_model_len {length:,}{where}"
    if endpoint.server == "llama.cpp":
        return f"llama-server gives each request a {length:,}-token context{where}"
    return f"The server's context is {length:,} tokens{where}"


def context_warning(endpoint: Endpoint, budget: int, fixed: int | None = None) -> str | None:
    """A warning when the server's context is smaller than ``--max-context-tokens``;
    ``fixed``: the harness's estimate of its fixed prompt (system prompt and tool schemas),
    when known: a context that cannot hold it is said so, with the only fixes."""
    length = endpoint.context_length
    if length is None or length >= budget:
        return None
    want = suggested_context(budget)
    gives = _gives(endpoint, length)
    if fixed is not None and length <= fixed:
        return (f"{gives}: the harness's fixed prompt (system prompt and tool schemas, "
                f"~{fixed:,} tokens) alone does not fit, and every request will be refused. "
                f"{raise_context(endpoint, want)}; {COMPACT_PROMPT}.")
    if not _budget_helps(length, fixed):
        return (f"{gives}: the harness's fixed prompt (system prompt and tool schemas, "
                f"~{fixed:,} tokens) leaves little room for a conversation. "
                f"{raise_context(endpoint, want)}; {COMPACT_PROMPT}.")
    if endpoint.server == "ollama":
        return (f"{gives}, below --max-context-tokens {budget:,}: past it ollama silently "
                f"drops the oldest messages. {raise_context(endpoint, want)}, or pass "
                f"--max-context-tokens {length}.")
    if endpoint.server in ("vllm", "llama.cpp"):
        return (f"{gives}, below --max-context-tokens {budget:,}: longer requests are "
                f"refused. {raise_context(endpoint, want)}, or pass --max-context-tokens "
                f"{length}.")
    return f"{gives}, below --max-context-tokens {budget:,}. Pass --max-context-tokens {length}."


def refusal_hint(endpoint: Endpoint, prompt: int | None, context: int | None, *,
                 estimated: int, fixed: int, budget: int | None) -> str:
    """What fixes a request refused as longer than the context: the server's figures
    (``prompt`` tokens sent, ``context``), the harness's estimates of the request
    (``estimated``) and of its fixed part (``fixed``: system prompt and tool schemas).
    When the fixed part alone is over the context, only a larger context helps."""
    context = context or endpoint.context_length
    if context is None:
        return ("The conversation is longer than the server's context: lower "
                "--max-context-tokens or raise the server's context length.")
    scale = prompt / estimated if prompt and estimated else 1.0  # the server's count rules
    fixed_tokens = round(fixed * scale)
    want = suggested_context(max(budget or 0, 2 * fixed_tokens, prompt or 0))
    where = _gives(endpoint, context)
    if fixed_tokens >= context:
        return (f"The harness's fixed prompt alone (system prompt and tool schemas, "
                f"~{fixed_tokens:,} tokens) does not fit: {_lower_first(where)}. "
                f"{raise_context(endpoint, want)}; {COMPACT_PROMPT}.")
    room = _round_down(context / max(1.0, scale) * 0.9)
    lead = f"The conversation is longer than the server's context: {_lower_first(where)}."
    if not _budget_helps(room, fixed):
        return f"{lead} {raise_context(endpoint, want)}."
    return (f"{lead} Pass --max-context-tokens {room} so that the harness compacts it "
            f"before, or {_lower_first(raise_context(endpoint, want))}.")


def context_full(endpoint: Endpoint, prompt: int, completion: int, *, estimated: int,
                 fixed: int, budget: int | None) -> tuple[str, str] | None:
    """For an answer that ended with ``finish_reason: length``: whether the context ended
    it (the prompt and the answer fill it: llama.cpp stops there, as at ``-n``), and what
    to do, as (what happened, the fix); None when it was the output limit. ``estimated``
    and ``fixed``: the harness's estimates of the prompt and of its fixed part."""
    length = endpoint.context_length
    if length is None or prompt + completion < length - CONTEXT_FULL_SLACK:
        return None
    full = (f"the prompt's {prompt:,} tokens and the answer's {completion:,} filling the "
            f"{length:,} the server gives a request")
    want = suggested_context(max(budget or 0, 2 * length))
    fix = raise_context(endpoint, want)
    scale = prompt / estimated if estimated else 1.0
    room = _round_down(length / max(1.0, scale) * 0.6)  # in the harness's estimate
    if (prompt >= length // 2 and (budget is None or budget > room)
            and _budget_helps(room, fixed)):
        return full, (f"{fix}, or pass --max-context-tokens {room} so that the conversation "
                      f"is compacted while an answer still fits.")
    return full, f"{fix}."


def _budget_helps(room: int, fixed: int | None) -> bool:
    """Whether a ``--max-context-tokens`` of ``room`` leaves room for a conversation beside
    the fixed prompt (unknown: assume so)."""
    return fixed is None or room >= fixed * ROOM


def _round_down(tokens: float) -> int:
    return max(100, int(tokens) // 100 * 100)


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def truncation_warning(endpoint: Endpoint, reported: int, estimated: int) -> str:
    known = (f" (it holds {endpoint.context_length:,} tokens)"
             if endpoint.context_length else "")
    how = ("start ollama with a larger OLLAMA_CONTEXT_LENGTH" if endpoint.server == "ollama"
           else "raise the server's context length")
    return (f"The server counted {reported:,} prompt tokens for a request the harness "
            f"estimates at ~{estimated:,}: it probably cut the oldest messages to fit its "
            f"context{known}, so the model no longer sees the start of the conversation. "
            f"To keep everything, {how}, or lower --max-context-tokens to what it holds.")
