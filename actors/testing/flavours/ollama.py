"""ollama's OpenAI-compatible endpoint, from its sources (``openai/openai.go``,
``middleware/openai.go``, ``server/routes.go``, ``api/types.go``).

- Chunks carry ``"system_fingerprint": "fp_ollama"``; the first has the role *and* the first
  text; every chunk keeps ``"content": ""`` (Go's ``omitempty`` does not drop an empty string
  held in an ``any``); reasoning goes in ``reasoning``, split from content into two chunks.
- Each tool call arrives whole in one chunk, with a random ``call_xxxxxxxx`` id and its
  arguments marshalled by Go (sorted keys; ``<``, ``>`` and ``&`` as ``\\u003c``-style
  escapes).
  ``tool_index`` reproduces the versions: ``"sequential"`` (fixed), ``"zero"`` (0.20.x with
  gemma4: every call says ``index: 0``), ``"absent"`` (before 0.4.7: no ``index`` at all).
- The finish chunk has an empty delta; with ``include_usage`` the same chunk follows with
  ``choices: []`` and the usage; then ``[DONE]``.
- An error before the stream is ``{"error": {"message", "type": "api_error", ...}}``; after it
  began, ollama's writer turns the error into an empty chunk and the body just ends: no finish
  chunk, no ``[DONE]``.
- A prompt longer than the context length the model was loaded with is silently cut from the
  front (system messages kept); ``prompt_tokens`` then reports the cut prompt.
- Native API at the root: ``/api/version``, ``/api/show`` (``parameters`` with ``num_ctx``,
  ``model_info`` with the trained context length), ``/api/ps`` (``context_length`` of loaded
  models). Unknown models are 404 ``model 'x' not found``.
"""

from __future__ import annotations

import contextlib
import json
import random
import string
from collections.abc import Iterator, Sequence
from typing import Any, Literal

from actors.testing.flavours._base import JSON, Flavour, Response, pieces
from actors.testing.steps import Reply


def go_json(payload: Any, *, sort_keys: bool = False) -> str:
    """JSON as Go's encoding/json writes it: compact, HTML characters escaped."""
    text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False, sort_keys=sort_keys)
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def base_name(model: str) -> str:
    return model if ":" in model else f"{model}:latest"


class Ollama(Flavour):
    name = "ollama"
    reasoning_field = "reasoning"
    usage_counts_tools = True

    def __init__(
        self,
        *,
        tool_index: Literal["sequential", "zero", "absent"] = "sequential",
        calls_per_chunk: Literal["one", "all"] = "one",
        thinking: Literal["field", "inline"] = "field",
        version: str = "0.20.4",
        context_length: int = 4096,
        num_ctx_parameter: int | None = None,
        trained_context: int = 131072,
        loaded: bool = False,
        tools_supported: bool = True,
    ) -> None:
        self.tool_index = tool_index
        self.calls_per_chunk = calls_per_chunk
        self.thinking = thinking
        self.version = version
        self.context_length = num_ctx_parameter or context_length
        self.num_ctx_parameter = num_ctx_parameter
        self.trained_context = trained_context
        self.loaded = loaded
        self.tools_supported = tools_supported
        self._rng = random.Random(7)

    def default_models(self) -> list[str]:
        return ["gemma4:latest"]

    def completion_id(self, step: Reply) -> str:
        return f"chatcmpl-{step.request_index}"

    def call_id(self, step: Reply, n: int) -> Any:
        explicit = step.tool_calls[n].id
        if explicit is not None:
            return explicit
        return "call_" + "".join(self._rng.choices(string.ascii_lowercase + string.digits, k=8))

    def dumps(self, payload: Any) -> str:
        return go_json(payload)

    def base(self, step: Reply, body: JSON) -> JSON:
        base = super().base(step, body)
        return {**base, "system_fingerprint": "fp_ollama"}

    def chunk(self, step: Reply, body: JSON, delta: JSON, finish: str | None = None) -> JSON:
        return {**self.base(step, body),
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    def payloads(self, step: Reply, body: JSON) -> Iterator[JSON | bytes]:
        first = True

        def delta(**fields: Any) -> JSON:
            nonlocal first
            out = {"role": "assistant"} if first else {}
            first = False
            out.update(fields)
            return out

        self.loaded = True
        text = step.text
        if step.reasoning and self.thinking == "inline":
            text = f"<think>{step.reasoning}</think>\n\n{text}"
        elif step.reasoning:
            for piece in pieces(step.reasoning):
                yield self.chunk(step, body, delta(content="", reasoning=piece))
        for piece in pieces(text):
            yield self.chunk(step, body, delta(content=piece))
        calls = self._calls(step)
        groups = [calls] if self.calls_per_chunk == "all" and calls else [[c] for c in calls]
        for group in groups:
            yield self.chunk(step, body, delta(content="", tool_calls=group))
        if first:  # a wholly empty completion still opens with a role chunk
            yield self.chunk(step, body, delta(content=""))
        yield from self.finish(step, body)

    def _calls(self, step: Reply) -> list[JSON]:
        calls = []
        for n, call in enumerate(step.tool_calls):
            arguments = call.arguments
            if isinstance(arguments, str):
                with contextlib.suppress(ValueError):
                    arguments = json.loads(arguments)
            text = (go_json(arguments, sort_keys=True) if not isinstance(arguments, str)
                    else arguments)
            entry: JSON = {"id": self.call_id(step, n), "type": "function",
                           "function": {"name": call.name, "arguments": text}}
            if self.tool_index == "sequential":
                entry = {"id": entry["id"], "index": n, **entry}
            elif self.tool_index == "zero":
                entry = {"id": entry["id"], "index": 0, **entry}
            calls.append(entry)
        return calls

    def finish(self, step: Reply, body: JSON) -> Iterator[JSON | bytes]:
        finish = self.chunk(step, body, {}, self.finish_reason(step))
        yield finish
        if self.wants_usage(body):
            yield {**finish, "choices": [], "usage": self.usage(step, body)}

    def usage(self, step: Reply, body: JSON) -> JSON:
        usage = super().usage(step, body)
        if step.usage is None:  # the prompt is cut to the context length, and reported so
            usage["prompt_tokens"] = min(usage["prompt_tokens"], self.context_length)
            usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        return usage

    def error_payload(self, status: int, message: str) -> JSON:
        kind = {400: "invalid_request_error", 404: "not_found_error"}.get(status, "api_error")
        return {"error": {"message": message, "type": kind, "param": None, "code": None}}

    def stream_failure(self, status: int, message: str) -> list[bytes]:
        # The error JSON goes through ollama's ChatWriter, which unmarshals it into an empty
        # chat response: one chunk with empty content, then the handler returns.
        return [self.sse({"id": "chatcmpl-failed", "object": "chat.completion.chunk",
                          "created": 0, "model": "", "system_fingerprint": "fp_ollama",
                          "choices": [{"index": 0, "delta": {"content": ""},
                                       "finish_reason": None}]})]

    def done(self) -> bytes | None:
        return b"data: [DONE]\n\n"

    def refuse(self, body: JSON, models: Sequence[str]) -> Response | None:
        model = str(body.get("model", ""))
        if base_name(model) not in {base_name(m) for m in models}:
            return 404, self.error_payload(404, f"model '{model}' not found")
        if body.get("tools") and not self.tools_supported:
            return 400, self.error_payload(
                400, f"registry.ollama.ai/library/{model} does not support tools")
        return None

    def models_payload(self, models: Sequence[str]) -> JSON:
        return {"object": "list", "data": [
            {"id": base_name(m), "object": "model", "created": 1767225600,
             "owned_by": "library"} for m in models
        ]}

    def get(self, path: str, models: Sequence[str]) -> Response | None:
        if path == "/api/version":
            return 200, {"version": self.version}
        if path == "/api/ps":
            running = [{"name": base_name(m), "model": base_name(m), "size": 9_600_000_000,
                        "digest": "c6eb396dbd59", "details": {},
                        "expires_at": "2026-01-01T00:05:00Z", "size_vram": 9_600_000_000,
                        "context_length": self.context_length} for m in models[:1]]
            return 200, {"models": running if self.loaded else []}
        if path == "/api/tags":
            return 200, {"models": [{"name": base_name(m), "model": base_name(m)}
                                    for m in models]}
        return None

    def post(self, path: str, body: JSON, models: Sequence[str]) -> Response | None:
        if path != "/api/show":
            return None
        model = str(body.get("model") or body.get("name") or "")
        if base_name(model) not in {base_name(m) for m in models}:
            return 404, {"error": f"model '{model}' not found"}
        parameters = 'stop                           "<end_of_turn>"'
        if self.num_ctx_parameter:
            parameters = f"num_ctx                        {self.num_ctx_parameter}\n{parameters}"
        return 200, {
            "parameters": parameters,
            "details": {"format": "gguf", "family": "gemma4", "parameter_size": "8.0B"},
            "model_info": {"general.architecture": "gemma4",
                           "gemma4.context_length": self.trained_context},
            "capabilities": ["completion", "tools"] if self.tools_supported else ["completion"],
        }

    def not_found(self, method: str, path: str) -> Response:
        return 404, "404 page not found"  # gin's answer for an unknown route
