"""vLLM's OpenAI-compatible server, from its sources (``vllm/entrypoints/openai/``:
``chat_completion/serving.py``, ``engine/protocol.py``, ``engine/serving.py``).

- Chunks: ``{"id", "object", "created", "model", "choices": [{"index", "delta", "logprobs":
  null, "finish_reason"}]}`` (``exclude_unset``); the first delta is
  ``{"role": "assistant", "content": ""}``; reasoning goes in ``reasoning`` (older versions:
  ``reasoning_content``, ``reasoning_field``).
- Tool calls: the first delta of a call has ``id`` (``chatcmpl-tool-<hex>``), ``type``,
  ``index`` and the name; arguments follow in pieces. ``null_fields`` sends the unset fields
  as ``null`` (``"id": null, "type": null, "name": null``) as some versions do.
  ``repeat_arguments`` reproduces the end-of-stream flush that repeats the whole arguments on
  the finish chunk (issues 51697 and 10395).
- With ``include_usage`` a last ``choices: []`` chunk carries the usage; then ``[DONE]``.
- Errors: ``{"error": {"message", "type": "BadRequestError", "param", "code": 400}}`` (older:
  ``{"object": "error", "message", ...}`` at the top, ``legacy_errors``). After the stream
  began: ``data: {"error": …}`` then ``data: [DONE]``.
- Unknown models are 404 ``The model `x` does not exist.``; without
  ``--enable-auto-tool-choice`` a request with tools is 400; ``/v1/models`` gives
  ``max_model_len``.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from typing import Any, Literal

from actors.testing.flavours._base import JSON, Flavour, Response, pieces, prompt_estimate
from actors.testing.steps import Reply

ERROR_TYPES = {400: "BadRequestError", 404: "NotFoundError", 501: "NotImplementedError"}


class VLLM(Flavour):
    name = "vllm"
    usage_counts_tools = True

    def __init__(
        self,
        *,
        reasoning_field: Literal["reasoning", "reasoning_content"] = "reasoning",
        repeat_arguments: bool = False,
        null_fields: bool = False,
        legacy_errors: bool = False,
        auto_tool_choice: bool = True,
        max_model_len: int = 32768,
    ) -> None:
        self.reasoning_field = reasoning_field
        self.repeat_arguments = repeat_arguments
        self.null_fields = null_fields
        self.legacy_errors = legacy_errors
        self.auto_tool_choice = auto_tool_choice
        self.max_model_len = max_model_len
        self._rng = random.Random(13)

    def default_models(self) -> list[str]:
        return ["google/gemma-4-E4B-it"]

    def completion_id(self, step: Reply) -> str:
        return f"chatcmpl-{step.request_index:04d}{self._rng.getrandbits(48):012x}"

    def call_id(self, step: Reply, n: int) -> Any:
        explicit = step.tool_calls[n].id
        if explicit is not None:
            return explicit
        return f"chatcmpl-tool-{self._rng.getrandbits(128):032x}"

    def tool_call_deltas(self, step: Reply) -> Iterator[JSON]:
        for n, call in enumerate(step.tool_calls):
            yield {"tool_calls": [{"id": self.call_id(step, n), "type": "function", "index": n,
                                   "function": {"name": call.name}}]}
            for piece in pieces(call.arguments_text, parts=4):
                entry: JSON = {"index": n, "function": {"arguments": piece}}
                if self.null_fields:
                    entry = {"id": None, "type": None, "index": n,
                             "function": {"name": None, "arguments": piece}}
                yield {"tool_calls": [entry]}

    def finish(self, step: Reply, body: JSON) -> Iterator[JSON | bytes]:
        delta: JSON = {}
        if self.repeat_arguments and step.tool_calls:
            delta = {"tool_calls": [{"index": n, "function": {"arguments": c.arguments_text}}
                                    for n, c in enumerate(step.tool_calls)]}
        finish = self.chunk(step, body, delta, self.finish_reason(step))
        finish["choices"][0]["stop_reason"] = None
        yield finish
        if self.wants_usage(body):
            yield {**self.base(step, body), "choices": [], "usage": self.usage(step, body)}

    def error_payload(self, status: int, message: str) -> JSON:
        kind = ERROR_TYPES.get(status, "InternalServerError" if status >= 500 else
                               "BadRequestError")
        if self.legacy_errors:
            return {"object": "error", "message": message, "type": kind, "param": None,
                    "code": status}
        return {"error": {"message": message, "type": kind, "param": None, "code": status}}

    def stream_failure(self, status: int, message: str) -> list[bytes]:
        error = self.error_payload(status, message)
        payload = error if self.legacy_errors else {"error": error["error"]}
        return [self.sse(payload), b"data: [DONE]\n\n"]

    def refuse(self, body: JSON, models: Sequence[str]) -> Response | None:
        model = str(body.get("model", ""))
        if model not in models:
            return 404, self.error_payload(404, f"The model `{model}` does not exist.")
        if body.get("tools") and not self.auto_tool_choice:
            return 400, self.error_payload(
                400, '"auto" tool choice requires --enable-auto-tool-choice and '
                "--tool-call-parser to be set")
        needed = prompt_estimate(body, with_tools=True)
        if needed > self.max_model_len:
            return 400, self.error_payload(
                400, f"This model's maximum context length is {self.max_model_len} tokens. "
                f"However, you requested {needed} tokens in the messages. Please reduce the "
                "length of the messages.")
        return None

    def models_payload(self, models: Sequence[str]) -> JSON:
        return {"object": "list", "data": [
            {"id": m, "object": "model", "created": 1767225600, "owned_by": "vllm", "root": m,
             "parent": None, "max_model_len": self.max_model_len, "permission": []}
            for m in models
        ]}

    def not_found(self, method: str, path: str) -> Response:
        return 404, {"detail": "Not Found"}  # FastAPI's answer for an unknown route
