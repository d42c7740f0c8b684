"""A server's wire format, as a flavour of the scripted server; the base is OpenAI's own.

A flavour turns a scripted :class:`~actors.testing.steps.Reply` into the exact bytes
a server sends (chunks, tool-call deltas, reasoning, usage, the end of the stream), says how
the server reports errors (before the stream, and after it began), which requests it refuses
before running the model, and what its other endpoints answer (``/v1/models``, ollama's
native API, llama.cpp's ``/props``). Each server's module says where in its sources the
format comes from.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator, Sequence
from typing import Any

from actors.testing.steps import Reply

JSON = dict[str, Any]
Response = tuple[int, JSON | str]  # status and a JSON body or plain text


def pieces(text: str, parts: int = 3) -> list[str]:
    """Split text into streamable pieces: per word, or at least ``parts`` slices if short."""
    words = re.findall(r"\s*\S+\s*|\s+", text)
    if len(words) >= parts or len(text) < parts:
        return words or ([text] if text else [])
    size = -(-len(text) // parts)
    return [text[i : i + size] for i in range(0, len(text), size)]


def prompt_estimate(body: JSON, *, with_tools: bool) -> int:
    """Tokens a server would count for the request (about four characters a token)."""
    size = len(json.dumps(body.get("messages", [])))
    if with_tools:
        size += len(json.dumps(body.get("tools") or []))
    return size // 4 + 1


class Flavour:
    """OpenAI's chat-completions stream, as the project's generic endpoint."""

    name = "openai"
    reasoning_field = "reasoning_content"  # where a scripted reasoning goes (DeepSeek's API)
    usage_counts_tools = False
    send_usage = True  # False: a server that never reports usage

    def __init__(self, *, send_usage: bool = True) -> None:
        self.send_usage = send_usage

    # -- identity --------------------------------------------------------------------------

    def default_models(self) -> list[str]:
        return ["scripted-model", "gemma4"]  # gemma4: the harness's default model

    def completion_id(self, step: Reply) -> str:
        return f"chatcmpl-scripted-{step.request_index}"

    def call_id(self, step: Reply, n: int) -> Any:
        """The id of tool call ``n`` (a scripted id wins, even a non-string one)."""
        explicit = step.tool_calls[n].id
        return explicit if explicit is not None else f"call_{step.request_index}_{n}"

    def dumps(self, payload: Any) -> str:
        return json.dumps(payload)

    def sse(self, payload: JSON | str) -> bytes:
        text = payload if isinstance(payload, str) else self.dumps(payload)
        return f"data: {text}\n\n".encode()

    def done(self) -> bytes | None:
        """What ends a successful stream (None: the body just ends)."""
        return b"data: [DONE]\n\n"

    # -- the stream ------------------------------------------------------------------------

    def base(self, step: Reply, body: JSON) -> JSON:
        return {
            "id": self.completion_id(step),
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": body.get("model", "scripted"),
        }

    def chunk(self, step: Reply, body: JSON, delta: JSON, finish: str | None = None) -> JSON:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {**self.base(step, body), "choices": [choice]}

    def events(self, step: Reply, body: JSON) -> Iterator[bytes]:
        """The framed events of a streamed reply, usage included, ``[DONE]`` excluded."""
        for payload in self.payloads(step, body):
            yield payload if isinstance(payload, bytes) else self.sse(payload)

    def payloads(self, step: Reply, body: JSON) -> Iterator[JSON | bytes]:
        yield self.chunk(step, body, {"role": "assistant", "content": ""})
        for delta in self.reasoning_deltas(step):
            yield self.chunk(step, body, delta)
        for piece in pieces(step.text):
            yield self.chunk(step, body, {"content": piece})
        for delta in self.tool_call_deltas(step):
            yield self.chunk(step, body, delta)
        yield from self.finish(step, body)

    def reasoning_deltas(self, step: Reply) -> Iterator[JSON]:
        for piece in pieces(step.reasoning):
            yield {self.reasoning_field: piece}

    def tool_call_deltas(self, step: Reply) -> Iterator[JSON]:
        for n, call in enumerate(step.tool_calls):
            yield {"tool_calls": [{
                "index": n, "id": self.call_id(step, n), "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }]}
            for piece in pieces(call.arguments_text, parts=4):
                yield {"tool_calls": [{"index": n, "function": {"arguments": piece}}]}

    def finish_reason(self, step: Reply) -> str:
        return step.finish_reason or ("tool_calls" if step.tool_calls else "stop")

    def finish(self, step: Reply, body: JSON) -> Iterator[JSON | bytes]:
        yield self.chunk(step, body, {}, self.finish_reason(step))
        if self.wants_usage(body):
            yield {**self.base(step, body), "choices": [], "usage": self.usage(step, body)}

    def wants_usage(self, body: JSON) -> bool:
        return self.send_usage and bool((body.get("stream_options") or {}).get("include_usage"))

    def usage(self, step: Reply, body: JSON) -> JSON:
        if step.usage is not None:
            prompt, completion = step.usage
        else:
            prompt = prompt_estimate(body, with_tools=self.usage_counts_tools)
            out = step.reasoning + step.text + "".join(
                c.name + c.arguments_text for c in step.tool_calls)
            completion = len(out) // 4 + 1
        return {"prompt_tokens": prompt, "completion_tokens": completion,
                "total_tokens": prompt + completion}

    # -- the whole completion (a request without "stream") -----------------------------------

    def completion(self, step: Reply, body: JSON) -> JSON:
        message: JSON = {"role": "assistant", "content": step.text or None, "refusal": None}
        if step.tool_calls:
            message["tool_calls"] = [
                {"id": self.call_id(step, n), "type": "function",
                 "function": {"name": c.name, "arguments": c.arguments_text}}
                for n, c in enumerate(step.tool_calls)
            ]
        return {
            "id": self.completion_id(step), "object": "chat.completion",
            "created": int(time.time()), "model": body.get("model", "scripted"),
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": self.finish_reason(step)}],
            "usage": self.usage(step, body),
        }

    # -- failures --------------------------------------------------------------------------

    def error_payload(self, status: int, message: str) -> JSON:
        kind = {400: "invalid_request_error", 401: "authentication_error",
                404: "not_found_error", 429: "rate_limit_exceeded"}.get(status, "server_error")
        return {"error": {"message": message, "type": kind, "param": None, "code": kind}}

    def stream_failure(self, status: int, message: str) -> list[bytes]:
        """What the server writes when it fails after the stream began (then the body ends)."""
        return [self.sse({"error": {"message": message, "type": "server_error",
                                    "param": None, "code": status}})]

    def refuse(self, body: JSON, models: Sequence[str]) -> Response | None:
        """A request the server refuses before running the model (its configuration)."""
        return None

    # -- other endpoints -------------------------------------------------------------------

    def models_payload(self, models: Sequence[str]) -> JSON:
        return {"object": "list", "data": [
            {"id": m, "object": "model", "created": 0, "owned_by": "scripted"} for m in models
        ]}

    def get(self, path: str, models: Sequence[str]) -> Response | None:
        return None

    def post(self, path: str, body: JSON, models: Sequence[str]) -> Response | None:
        return None

    def not_found(self, method: str, path: str) -> Response:
        return 404, self.error_payload(404, f"no such endpoint: {method} {path}")
