"""The wire formats the endpoint tests run against (each server and its quirks), with the
turn they all play: parallel tool calls with reasoning around them."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from actors.testing.flavours import VLLM, Flavour, LlamaCpp, Ollama
from actors.testing.scripted_server import Reply, ToolCall

THINKING = "The user wants a file; I will write it and read it back."
AFTER = "Both calls worked, so I can answer."
CONTENT = "a > b && c < d"
TAGS = ("<think>", "</think>", "<|channel>", "<channel|>")  # inline reasoning markup

# (id, flavour, the model name the server knows)
FLAVOURS: list[tuple[str, Callable[[], Flavour], str]] = [
    ("openai", Flavour, "gemma4"),
    ("ollama", Ollama, "gemma4"),
    ("ollama-0.20-index-zero", lambda: Ollama(tool_index="zero"), "gemma4"),
    ("ollama-0.20-one-chunk", lambda: Ollama(tool_index="zero", calls_per_chunk="all"),
     "gemma4"),
    ("ollama-before-0.4.7-no-index", lambda: Ollama(tool_index="absent"), "gemma4"),
    ("ollama-inline-think", lambda: Ollama(thinking="inline"), "gemma4"),
    ("llama.cpp", LlamaCpp, "any-name"),
    ("llama.cpp-reasoning-none", lambda: LlamaCpp(reasoning_format="none"), "any-name"),
    ("llama.cpp-reasoning-none-think",
     lambda: LlamaCpp(reasoning_format="none", template="think"), "any-name"),
    ("llama.cpp-lone-close", lambda: LlamaCpp(reasoning_format="lone-close"), "any-name"),
    ("llama.cpp-arguments-object", lambda: LlamaCpp(arguments_as_object=True), "any-name"),
    ("llama.cpp-old-usage", lambda: LlamaCpp(usage_in_finish=True), "any-name"),
    ("vllm", VLLM, "google/gemma-4-E4B-it"),
    ("vllm-repeated-arguments", lambda: VLLM(repeat_arguments=True), "google/gemma-4-E4B-it"),
    ("vllm-null-fields", lambda: VLLM(null_fields=True, reasoning_field="reasoning_content"),
     "google/gemma-4-E4B-it"),
]


def script() -> list[Reply]:
    return [
        Reply(reasoning=THINKING, tool_calls=[
            ToolCall("write_file", {"path": "out.txt", "content": CONTENT}),
            ToolCall("run_bash", {"command": "cat out.txt"}),
        ]),
        Reply("I wrote out.txt and read it back.", reasoning=AFTER),
    ]


def sent_text(requests: list[dict[str, Any]]) -> str:
    """What the requests sent, but the reasoning sent back as such (see
    tests/model/test_endpoint_reasoning.py)."""
    return json.dumps([[{k: v for k, v in m.items() if k != "reasoning_content"}
                        for m in r["messages"]] for r in requests], ensure_ascii=False)
