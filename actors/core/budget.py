"""Token estimates and usage accounting.

The estimate counts content, tool-call names and arguments at about four characters per token,
plus a small overhead per message. Where the endpoint reported ``prompt_tokens`` for the last
request, :class:`ContextEstimator` starts from that figure and estimates only what was added
since.
"""

from __future__ import annotations

import json
from collections.abc import MutableSequence, Sequence
from dataclasses import dataclass, field
from typing import Any

from actors.core.messages import Message, tool_calls_of

CHARS_PER_TOKEN = 4
MESSAGE_OVERHEAD = 4
SMALL_CONTEXT_TOKENS = 8192
"""A context of at most this many tokens (the budget, or what the server really holds) gets
the compact system prompt and tool schemas (actors.core.prompts)."""


def estimate_message(message: Message) -> int:
    chars = 0
    content = message.get("content")
    if isinstance(content, str):
        chars += len(content)
    elif content is not None:
        chars += len(json.dumps(content, ensure_ascii=False))
    for call in tool_calls_of(message):
        fn = call.get("function") or {}
        chars += len(str(fn.get("name", ""))) + len(str(fn.get("arguments", "")))
    return MESSAGE_OVERHEAD + (chars + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def estimate_messages(messages: Sequence[Message]) -> int:
    saved = getattr(messages, "estimate_tokens", None)  # stored messages (actors.core.stored)
    if saved is not None:  # know their estimates without being parsed
        return int(saved())
    return sum(estimate_message(m) for m in messages)


def estimate_tools(tools: Sequence[dict[str, Any]] | None) -> int:
    """Tokens of the tool schemas sent with a request (about 2,250 for the harness's own)."""
    if not tools:
        return 0
    return (len(json.dumps(list(tools), ensure_ascii=False)) + CHARS_PER_TOKEN - 1) \
        // CHARS_PER_TOKEN


def estimate_fixed(messages: Sequence[Message], tools: Sequence[dict[str, Any]] | None) -> int:
    """What every request of a conversation carries, estimated: the system prompt (its first
    message) and the tool schemas. A stored context (``actors.core.stored``), which always
    begins with its system prompt, is not parsed for it: its saved estimate is taken."""
    saved = getattr(messages, "estimate", None)
    if saved is not None and len(messages):
        system = int(saved(0))
    else:
        first = messages[0] if len(messages) else None
        system = estimate_message(first) if first is not None and first.get(
            "role") == "system" else 0
    return system + estimate_tools(tools)


TRUNCATED_SHARE = 0.5  # reported below half the estimate ...
TRUNCATED_MARGIN = 1000  # ... and by at least this many tokens: the server cut the prompt


def prompt_truncated(reported: int, estimated: int) -> bool:
    """Whether the server's ``prompt_tokens`` is so far below the harness's own estimate of
    the request that the server must have cut it (ollama drops the oldest messages of a
    prompt longer than its context, silently, and reports what it kept)."""
    return reported < estimated * TRUNCATED_SHARE and estimated - reported >= TRUNCATED_MARGIN


@dataclass
class ContextEstimator:
    """The context size in tokens: the last reported prompt size plus an estimate of the rest.

    Where no size was reported (an endpoint without usage), the estimate of the messages is
    kept, with the list it was made of: the next estimate of the same list adds only the
    messages appended since, so the gauge after every checkpoint does not cost the whole
    context. This relies on the working context's rule: its list only grows (by appends)
    until it is replaced by a new list, and :meth:`reset` is called then too.
    """

    reported_tokens: int | None = None
    reported_at_length: int = 0  # how many messages the reported request held
    _seen: Sequence[Message] | None = field(default=None, repr=False, compare=False)
    _seen_length: int = field(default=0, repr=False, compare=False)
    _seen_tokens: int = field(default=0, repr=False, compare=False)

    def record(self, prompt_tokens: int | None, message_count: int) -> None:
        if prompt_tokens:
            self.reported_tokens = prompt_tokens
            self.reported_at_length = message_count

    def reset(self) -> None:
        """Forget the reported figure (after the context was replaced)."""
        self.reported_tokens = None
        self.reported_at_length = 0
        self._seen, self._seen_length, self._seen_tokens = None, 0, 0

    def estimate(self, messages: Sequence[Message], overhead: int = 0) -> int:
        """Tokens of a request with ``messages``; ``overhead`` (e.g. the tool schemas) is
        added to a pure estimate only: a reported prompt size already includes it."""
        if self.reported_tokens is None or self.reported_at_length > len(messages):
            return self._estimate_all(messages) + overhead
        return self.reported_tokens + estimate_messages(messages[self.reported_at_length:])

    def _estimate_all(self, messages: Sequence[Message]) -> int:
        """``estimate_messages(messages)``, adding only what was appended since the last
        estimate of this same list."""
        length = len(messages)
        if messages is self._seen and length >= self._seen_length:
            tokens = self._seen_tokens + estimate_messages(messages[self._seen_length:])
        else:
            tokens = estimate_messages(messages)
        if isinstance(messages, MutableSequence):  # a tuple (a snapshot) is a copy: not kept
            self._seen, self._seen_length, self._seen_tokens = messages, length, tokens
        return tokens


@dataclass
class Usage:
    prompt_tokens: int
    completion_tokens: int
    estimated: bool = False


@dataclass
class UsageTotals:
    """Cumulative usage of a session, saved in its state and restored on resume.

    A fork starts its own counter (the limits apply to it) and keeps what its ancestors had
    spent when it was made apart, in ``inherited`` (:meth:`forked`).
    """

    total_tokens_in: int = 0
    total_tokens_out: int = 0
    total_cost_usd: float = 0.0
    calls: int = 0
    inherited: InheritedUsage | None = None

    def add(self, usage: Usage, price_in: float, price_out: float) -> None:
        self.total_tokens_in += usage.prompt_tokens
        self.total_tokens_out += usage.completion_tokens
        self.total_cost_usd += (
            usage.prompt_tokens / 1000 * price_in + usage.completion_tokens / 1000 * price_out
        )
        self.calls += 1

    def minus(self, earlier: UsageTotals) -> UsageTotals:
        """What was used since ``earlier`` (a copy taken before), without the inherited part."""
        return UsageTotals(
            self.total_tokens_in - earlier.total_tokens_in,
            self.total_tokens_out - earlier.total_tokens_out,
            self.total_cost_usd - earlier.total_cost_usd,
            self.calls - earlier.calls,
        )

    def forked(self) -> UsageTotals:
        """The usage of a fork made now: a counter at zero, and this session's own and
        inherited usage as the fork's inherited usage."""
        before = self.inherited or InheritedUsage()
        return UsageTotals(inherited=InheritedUsage(
            before.tokens_in + self.total_tokens_in,
            before.tokens_out + self.total_tokens_out,
            before.cost_usd + self.total_cost_usd,
            before.calls + self.calls,
        ))

    def to_state(self) -> dict[str, Any]:
        state: dict[str, Any] = {
            "total_tokens_in": self.total_tokens_in,
            "total_tokens_out": self.total_tokens_out,
            "total_cost_usd": round(self.total_cost_usd, 8),
            "calls": self.calls,
        }
        if self.inherited is not None:
            state["inherited_usage"] = self.inherited.to_state()
        return state

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> UsageTotals:
        inherited = state.get("inherited_usage")
        return cls(
            total_tokens_in=int(state.get("total_tokens_in", 0)),
            total_tokens_out=int(state.get("total_tokens_out", 0)),
            total_cost_usd=float(state.get("total_cost_usd", 0.0)),
            calls=int(state.get("calls", 0)),
            inherited=InheritedUsage.from_state(inherited) if isinstance(inherited, dict)
            else None,
        )


@dataclass(frozen=True)
class InheritedUsage:
    """What a fork's ancestors had spent when it was made (shown apart, never limited)."""

    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    calls: int = 0

    def to_state(self) -> dict[str, Any]:
        return {"tokens_in": self.tokens_in, "tokens_out": self.tokens_out,
                "cost_usd": round(self.cost_usd, 8), "calls": self.calls}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> InheritedUsage:
        return cls(int(state.get("tokens_in", 0)), int(state.get("tokens_out", 0)),
                   float(state.get("cost_usd", 0.0)), int(state.get("calls", 0)))


def forked_state(state: dict[str, Any]) -> dict[str, Any]:
    """A fork's state from its parent's: planning and pins kept, the usage counter and the
    tool-call count started again, the parent's usage kept as inherited."""
    usage = UsageTotals.from_state(state).forked()
    return {**state, **usage.to_state(), "tool_calls": 0}
