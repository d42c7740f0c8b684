"""What the model client actor is asked and what it answers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from actors.core.budget import Usage
from actors.core.errors import ModelError
from actors.core.events import EventSink
from actors.core.messages import Message, tool_calls_of
from actors.core.turn import Turn

CUT_ANSWER_NOTICE = ("The answer was cut at the model's output limit (finish_reason "
                     "'length'); ask it to go on, or raise the server's output limit.")
CUT_CALLS_REASON = ("The model's answer was cut at its output limit (finish_reason 'length') "
                    "in the middle of its tool calls; none of them was run.")
CUT_CALL_RESULT = ("Not executed: your answer was cut at the output limit (finish_reason "
                   "'length') before this call was complete. Safe to retry with shorter "
                   "arguments.")
CONTEXT_FULL_NOTICE = ("The answer was cut because the server's context is full "
                       "(finish_reason 'length' with {full}). {hint}")
CONTEXT_FULL_CALLS = ("The model's answer was cut because the server's context is full "
                      "(finish_reason 'length' with {full}) in the middle of its tool calls; "
                      "none of them was run. {hint}")
REASONING_ONLY_REASON = ("The model spent its whole answer on reasoning and gave no answer "
                         "(finish_reason '{finish}'). Ask again, or raise the server's output "
                         "limit.")
# The same ends, when the harness cut the answer at --max-answer-bytes (the endpoint sent more).
OVER_LIMIT_NOTICE = ("The answer was cut at {limit:,} bytes (--max-answer-bytes): the endpoint "
                     "sent more than that. Ask for less at a time, or raise --max-answer-bytes.")
OVER_LIMIT_CALLS_REASON = ("The model's answer passed {limit:,} bytes (--max-answer-bytes) in the "
                           "middle of its tool calls; none of them was run.")
OVER_LIMIT_CALL_RESULT = ("Not executed: your answer passed the harness's limit of {limit:,} "
                          "bytes before this call was complete. Safe to retry with shorter "
                          "arguments, or in smaller steps.")
OVER_LIMIT_REASONING_REASON = ("The model's reasoning passed {limit:,} bytes "
                               "(--max-answer-bytes) before any answer; the answer was cut "
                               "there. Ask again, or raise --max-answer-bytes.")


@dataclass
class ModelRequest:
    """One chat request. ``saved``: set once the store holds what ``messages`` carries. The
    request goes out at once, but nothing of its answer (no event, no outcome) leaves the
    model client before it is set, so an answer is never shown or acted on before what it
    answers is durable; the caller cancels ``turn`` instead when that checkpoint fails."""

    messages: Sequence[Message]  # read, never changed (stored messages: see actors.core.stored)
    reply: MemoryObjectSendStream[ModelOutcome]
    tools: list[dict[str, Any]] | None = None
    turn: Turn | None = None
    events: EventSink | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    saved: anyio.Event | None = None
    small_tools: list[dict[str, Any]] | None = None
    """Sent instead of ``tools`` once the server is known to hold a small context (at most
    :data:`~actors.core.budget.SMALL_CONTEXT_TOKENS`): the compact schemas."""
    model: str | None = None  # the model to ask (None: the client's); \\model changes it


@dataclass
class ModelOutcome:
    """Exactly one of: a complete ``message``; ``interrupted`` (with the answer text received
    so far); an ``error`` (a :class:`~actors.core.errors.ModelError`, whose ``str()`` is the
    one line for the user).

    ``reasoning`` is the model's thinking, kept out of ``message`` (it is never sent back).
    """

    message: Message | None = None
    usage: Usage | None = None
    finish_reason: str | None = None
    interrupted: bool = False
    partial_text: str = ""
    error: ModelError | None = None
    reasoning: str = ""
    over_limit: int | None = None  # the answer was cut at this many bytes (--max-answer-bytes)
    context_full: tuple[str, str] | None = None  # a cut by the full context: what, and the fix

    @property
    def cut(self) -> bool:
        """The answer stopped at the model's output limit, or at the end of the context."""
        return self.finish_reason == "length"

    @property
    def cut_tool_calls(self) -> bool:
        """Tool calls cut by the output limit: their arguments may be incomplete; not run."""
        return self.cut and self.message is not None and bool(tool_calls_of(self.message))

    @property
    def reasoning_only(self) -> bool:
        """Reasoning and nothing else: no answer text, no tool calls."""
        message = self.message
        if message is None or not self.reasoning:
            return False
        return not str(message.get("content") or "").strip() and not tool_calls_of(message)

    def reasoning_only_reason(self) -> str:
        if self.over_limit is not None:
            return OVER_LIMIT_REASONING_REASON.format(limit=self.over_limit)
        return REASONING_ONLY_REASON.format(finish=self.finish_reason or "none")

    @property
    def cut_notice(self) -> str:
        """What the user is told of an answer :attr:`cut`: the harness's cap, a full
        context and its fix, or the model's output limit."""
        if self.over_limit is not None:
            return OVER_LIMIT_NOTICE.format(limit=self.over_limit)
        if self.context_full is not None:
            full, hint = self.context_full
            return CONTEXT_FULL_NOTICE.format(full=full, hint=hint)
        return CUT_ANSWER_NOTICE

    @property
    def cut_calls_reason(self) -> str:
        """Why the turn stopped when :attr:`cut_tool_calls`."""
        if self.over_limit is not None:
            return OVER_LIMIT_CALLS_REASON.format(limit=self.over_limit)
        if self.context_full is not None:
            full, hint = self.context_full
            return CONTEXT_FULL_CALLS.format(full=full, hint=hint)
        return CUT_CALLS_REASON

    @property
    def cut_call_result(self) -> str:
        """The result of each call cut with the answer (never run)."""
        if self.over_limit is not None:
            return OVER_LIMIT_CALL_RESULT.format(limit=self.over_limit)
        return CUT_CALL_RESULT
