"""llama.cpp's ``llama-server``, from its sources (``tools/server/server-common.cpp``,
``server-task.cpp``, ``server-context.cpp``, ``common/chat.cpp``).

- Chunks: ``{"choices": [{"finish_reason", "index", "delta"}], "created", "id", "model",
  "system_fingerprint": "b<build>-<commit>", "object"}``; the first delta is
  ``{"role": "assistant", "content": null}``.
- Reasoning by ``--reasoning-format``: ``"deepseek"`` (the default, ``auto``) sends
  ``reasoning_content`` deltas; ``"none"`` leaves the model's own markup in the content:
  Gemma 4's ``<|channel>thought\n…<channel|>`` (``template="gemma4"``, checked against the
  real server), ``<think>…</think>`` for the others (``template="think"``); ``"lone-close"``
  is builds >= b9211 whose template opened the block in the prompt: the content is the
  reasoning, ``</think>``, then the answer (issue 23320).
- Tool calls stream in fragments: the first delta of a call has ``index``, a random 32-char
  ``id``, ``type`` and the name; later ones only ``index`` and an ``arguments`` piece. With
  ``arguments_as_object`` (builds of March 2026, issue 20198) each call comes whole with its
  ``arguments`` as a JSON object.
- The finish chunk has ``delta: {}``; with ``include_usage`` a ``choices: []`` chunk follows
  with ``usage`` (with ``prompt_tokens_details.cached_tokens``) and ``timings`` (nine
  fields); then ``[DONE]`` (older builds, ``usage_in_finish``: usage on the finish chunk).
  ``finish_reason: "length"`` ends an answer at ``-n`` and also one that filled the context
  (prompt and answer tokens then add up to ``n_ctx``).
- Errors are ``{"error": {"code": 500, "message", "type": "server_error"}}`` with the status of
  their type. After the stream began: ``data: {"error": …}`` and the body ends, no ``[DONE]``
  (older builds, ``legacy_errors``: an ``error: {…}`` field, then ``data: [DONE]``); the one
  that happens is 500 ``Context size has been exceeded.``, to every request in flight when
  the KV cache the slots share fills up.
- Slots: ``-np`` defaults to 4 (``slots``) sharing one KV cache of ``-c`` tokens, each slot
  allowed all of it; with ``--no-kv-unified`` (``kv_unified=False``) each gets ``-c / -np``.
  ``/props`` ``n_ctx`` and ``/v1/models`` ``meta.n_ctx`` are one slot's.
- ``/props`` also tells the chat template (``template``: Gemma 4's, or a ChatML one) with its
  capabilities, BOS and EOS; ``/tokenize`` keeps the model's special tokens whole.
- Without ``--jinja`` (current builds: with ``--no-jinja``) a request with tools fails: HTTP 500
  ``tools param requires --jinja flag``. A prompt over ``n_ctx`` is refused before any
  stream: 400 ``exceed_context_size_error`` with ``n_prompt_tokens`` and ``n_ctx``. Any model
  name is accepted (one model per server). Checked against the real server at 0c1e57098
  (tests/e2e/test_llamacpp_real.py).
"""

from __future__ import annotations

import random
import string
from collections.abc import Iterator, Sequence
from typing import Any, Literal

from actors.testing.flavours._base import JSON, Flavour, Response, pieces, prompt_estimate
from actors.testing.steps import Reply

# What /props says of the chat template, abridged to the parts the harness reads: Gemma 4's
# own (it renders an assistant message's reasoning_content after the last user message; its
# markup is the model's control tokens) and a template that keeps no reasoning, in ChatML.
TEMPLATES = {
    "gemma4": (
        "{{- bos_token -}}{%- for message in loop_messages -%}"
        "{{- '<|turn>' + role + '\\n' -}}"
        "{%- set thinking_text = message.get('reasoning') or message.get('reasoning_content') -%}"
        "{%- if thinking_text and loop.index0 > ns_turn.last_user_idx and "
        "message.get('tool_calls') -%}"
        "{{- '<|channel>thought\\n' + thinking_text + '\\n<channel|>' -}}{%- endif -%}"
        "{{- '<|tool_call>call:' + function['name'] + '{' -}}{{- '}<tool_call|>' -}}"
        "{{- '<|tool_response>' -}}{{- '<|\"|>' + argument + '<|\"|>' -}}"
        "{{- '<tool_response|>' -}}{{- '<turn|>\\n' -}}{%- endfor -%}"
        "{%- if add_generation_prompt -%}{{- '<|turn>model\\n' -}}{%- endif -%}"
    ),
    "think": (
        "{%- for message in messages -%}{{- '<|im_start|>' + message.role + '\\n' -}}"
        "{%- if '</think>' in content -%}{%- set content = content.split('</think>')[-1] -%}"
        "{%- endif -%}{{- content + '<|im_end|>\\n' -}}{%- endfor -%}"
        "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n<think>\\n' -}}"
        "{%- endif -%}"
    ),
}
# The special tokens of each template's model (what /tokenize keeps whole with parse_special).
SPECIAL_TOKENS = {
    "gemma4": ("<bos>", "<eos>", "<pad>", "<|turn>", "<turn|>", "<|channel>", "<channel|>",
               "<|tool_call>", "<tool_call|>", "<|tool_response>", "<tool_response|>",
               '<|"|>', "<|tool>", "<tool|>", "<|think|>"),
    "think": ("<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>"),
}
BOS_EOS = {"gemma4": ("<bos>", "<eos>"), "think": ("", "<|im_end|>")}

ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403:
               "permission_error", 404: "not_found_error", 501: "not_supported_error",
               503: "unavailable_error"}


class LlamaCpp(Flavour):
    name = "llama.cpp"
    reasoning_field = "reasoning_content"
    usage_counts_tools = True

    def __init__(
        self,
        *,
        reasoning_format: Literal["deepseek", "none", "lone-close"] = "deepseek",
        template: Literal["gemma4", "think"] = "gemma4",
        arguments_as_object: bool = False,
        usage_in_finish: bool = False,
        legacy_errors: bool = False,
        jinja: bool = True,
        n_ctx: int = 8192,
        slots: int = 4,
        kv_unified: bool = True,
        build: str = "b9294-0f3cb3fc8",
    ) -> None:
        self.reasoning_format = reasoning_format
        self.template = template
        self.arguments_as_object = arguments_as_object
        self.usage_in_finish = usage_in_finish
        self.legacy_errors = legacy_errors
        self.jinja = jinja
        self.n_ctx = n_ctx  # -c
        self.slots = slots  # -np (4 by default: "auto")
        self.kv_unified = kv_unified  # False: --no-kv-unified, each slot gets -c / -np
        self.build = build
        self._rng = random.Random(11)

    def default_models(self) -> list[str]:
        return ["gemma-4-E4B-it-Q4_K_M.gguf"]

    def _random(self, n: int) -> str:
        return "".join(self._rng.choices(string.ascii_letters + string.digits, k=n))

    def completion_id(self, step: Reply) -> str:
        return f"chatcmpl-{step.request_index}{self._random(8)}"

    def call_id(self, step: Reply, n: int) -> Any:
        explicit = step.tool_calls[n].id
        return explicit if explicit is not None else self._random(32)

    def base(self, step: Reply, body: JSON) -> JSON:
        return {"created": 1767225600, "id": self.completion_id(step),
                "model": body.get("model", "gpt-3.5-turbo"),
                "system_fingerprint": self.build, "object": "chat.completion.chunk"}

    def chunk(self, step: Reply, body: JSON, delta: JSON, finish: str | None = None) -> JSON:
        return {"choices": [{"finish_reason": finish, "index": 0, "delta": delta}],
                **self.base(step, body)}

    def payloads(self, step: Reply, body: JSON) -> Iterator[JSON | bytes]:
        yield self.chunk(step, body, {"role": "assistant", "content": None})
        text = step.text
        if step.reasoning and self.reasoning_format == "none" and self.template == "gemma4":
            text = f"<|channel>thought\n{step.reasoning}<channel|>{text}"
        elif step.reasoning and self.reasoning_format == "none":
            text = f"<think>\n{step.reasoning}\n</think>\n\n{text}"
        elif step.reasoning and self.reasoning_format == "lone-close":
            text = f"{step.reasoning}\n</think>\n\n{text}"
        elif step.reasoning:
            for piece in pieces(step.reasoning):
                yield self.chunk(step, body, {"reasoning_content": piece})
        for piece in pieces(text):
            yield self.chunk(step, body, {"content": piece})
        for delta in self.tool_call_deltas(step):
            yield self.chunk(step, body, delta)
        yield from self.finish(step, body)

    def tool_call_deltas(self, step: Reply) -> Iterator[JSON]:
        for n, call in enumerate(step.tool_calls):
            head = {"index": n, "id": self.call_id(step, n), "type": "function"}
            if self.arguments_as_object:
                arguments = call.arguments if not isinstance(call.arguments, str) else (
                    _loads_or(call.arguments))
                yield {"tool_calls": [{**head, "function": {"name": call.name,
                                                             "arguments": arguments}}]}
                continue
            parts = pieces(call.arguments_text, parts=4) or [""]
            yield {"tool_calls": [{**head, "function": {"name": call.name,
                                                         "arguments": parts[0]}}]}
            for piece in parts[1:]:
                yield {"tool_calls": [{"index": n, "function": {"arguments": piece}}]}

    def usage(self, step: Reply, body: JSON) -> JSON:
        return {**super().usage(step, body), "prompt_tokens_details": {"cached_tokens": 0}}

    def timings(self, usage: JSON) -> JSON:
        prompt, predicted = usage["prompt_tokens"], usage["completion_tokens"]
        return {"cache_n": 0, "prompt_n": prompt, "prompt_ms": 30.5,
                "prompt_per_token_ms": 30.5 / prompt, "prompt_per_second": prompt / 0.0305,
                "predicted_n": predicted, "predicted_ms": 80.1,
                "predicted_per_token_ms": 80.1 / max(1, predicted),
                "predicted_per_second": predicted / 0.0801}

    def finish(self, step: Reply, body: JSON) -> Iterator[JSON | bytes]:
        finish = self.chunk(step, body, {}, self.finish_reason(step))
        if self.usage_in_finish:  # older builds, without the cached tokens
            usage = super().usage(step, body)
            yield {**finish, "usage": usage, "timings": self.timings(usage)}
            return
        yield finish
        if self.wants_usage(body):
            usage = self.usage(step, body)
            yield {"choices": [], **self.base(step, body), "usage": usage,
                   "timings": self.timings(usage)}

    def error_payload(self, status: int, message: str) -> JSON:
        return {"error": {"code": status, "message": message,
                          "type": ERROR_TYPES.get(status, "server_error")}}

    def stream_failure(self, status: int, message: str) -> list[bytes]:
        error = self.error_payload(status, message)["error"]
        if self.legacy_errors:
            return [f"error: {self.dumps(error)}\n\n".encode(), b"data: [DONE]\n\n"]
        return [self.sse({"error": error})]

    def refuse(self, body: JSON, models: Sequence[str]) -> Response | None:
        if body.get("tools") and not self.jinja:
            return 500, self.error_payload(500, "tools param requires --jinja flag")
        needed = prompt_estimate(body, with_tools=True)
        if needed > self.slot_context:
            payload = self.error_payload(400, f"request ({needed} tokens) exceeds the "
                                         f"available context size ({self.slot_context} "
                                         "tokens), try increasing it")
            payload["error"].update(type="exceed_context_size_error", n_prompt_tokens=needed,
                                    n_ctx=self.slot_context)
            return 400, payload
        return None

    def models_payload(self, models: Sequence[str]) -> JSON:
        return {
            "models": [{"name": m, "model": m, "type": "model", "capabilities": ["completion"]}
                       for m in models],
            "object": "list",
            "data": [{"id": m, "aliases": [m], "tags": [], "object": "model",
                      "created": 1767225600, "owned_by": "llamacpp",
                      "meta": {"vocab_type": 2, "n_vocab": 262144, "n_ctx": self.slot_context,
                               "n_ctx_train": 131072}}
                     for m in models],
        }

    @property
    def slot_context(self) -> int:
        """The context one request gets (``n_ctx`` in /props)."""
        return self.n_ctx if self.kv_unified else self.n_ctx // self.slots

    def props(self, models: Sequence[str]) -> JSON:
        bos, eos = BOS_EOS[self.template]
        return {
            "default_generation_settings": {
                "params": {"temperature": 0.8, "max_tokens": -1, "n_predict": -1,
                           "chat_format": "Content-only", "reasoning_format": "none"},
                "n_ctx": self.slot_context},
            "total_slots": self.slots, "model_alias": models[0] if models else "",
            "model_path": models[0] if models else "",
            "modalities": {"vision": False, "video": False, "audio": False},
            "endpoint_slots": True, "endpoint_props": False, "endpoint_metrics": False,
            "chat_template": TEMPLATES[self.template],
            "chat_template_caps": {
                "supports_object_arguments": True, "supports_parallel_tool_calls": True,
                "supports_preserve_reasoning": False, "supports_reasoning_effort": False,
                "supports_string_content": True, "supports_system_role": True,
                "supports_tool_calls": True, "supports_tools": True,
                "supports_typed_content": True},
            "bos_token": bos, "eos_token": eos, "build_info": self.build,
            "is_sleeping": False}

    def get(self, path: str, models: Sequence[str]) -> Response | None:
        if path == "/props":
            return 200, self.props(models)
        if path == "/health":
            return 200, {"status": "ok"}
        return None

    def post(self, path: str, body: JSON, models: Sequence[str]) -> Response | None:
        if path == "/tokenize":  # pieces as with_pieces gives them: a special token whole
            content = str(body.get("content", ""))
            special = SPECIAL_TOKENS[self.template] if body.get("parse_special") else ()
            pieces: list[str] = []
            while content:
                token = next((t for t in special if content.startswith(t)), content[0])
                pieces.append(token)
                content = content[len(token):]
            return 200, {"tokens": [{"id": n, "piece": p} for n, p in enumerate(pieces)]}
        return None

    def not_found(self, method: str, path: str) -> Response:
        return 404, {"error": {"code": 404, "message": "File Not Found",
                               "type": "not_found_error"}}


def _loads_or(text: str) -> Any:
    import json

    try:
        return json.loads(text)
    except ValueError:
        return text
