"""Machine-readable print mode: ``-p PROMPT --output-format json`` and ``stream-json``.

``json`` prints one object on stdout when the run ends; ``stream-json`` prints one object per
line as things happen, the same result object last. Every object has a ``type``:

``session``       ``session_id``, ``resumed``, ``model`` (first, once the session is open)
``text``          ``text``: a piece of the answer as it streams
``stream_restarted``  ``reason``: the stream broke and is retried; text so far is void
``tool_call``     ``id``, ``name``, ``arguments`` (decoded JSON, or the text as sent)
``tool_result``   ``id``, ``name``, ``ok``, ``result`` (its first line)
``approval_denied``  ``tool``, ``description`` (print mode cannot ask)
``notice``        ``level`` (info, warning, error), ``text``
``compaction``    ``running``: the background compaction started or ended
``result``        ``session_id``, ``outcome`` (answered, interrupted, failed, limit),
                  ``is_error``, ``answer`` (the final answer, "" unless answered), ``error``
                  (the reason, null when answered), ``exit_code``, ``duration_ms``,
                  ``usage`` (``model_calls``, ``input_tokens``, ``output_tokens`` of this
                  run), ``cost_usd`` (this run), ``session_cost_usd`` (the session's own
                  counter after it), ``tool_calls`` (each ``id``, ``name``, ``arguments``,
                  ``ok``, ``result``), ``model``

The reasoning of thinking models is never printed, as in text mode. Terminal controls in any
string (``\u001b``, ``\u009b``, ``\u202e``) are written as JSON escapes: the same data, never
acted on by a terminal (:func:`~repl.interactive.sanitize.json_text`). Diagnostics still go to
stderr as in text mode; stdout holds only JSON. The exit status is text mode's (0 answered,
1 otherwise, 2 a usage mistake before the run).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, TextIO

from actors.core.budget import UsageTotals
from actors.core.events import (
    ApprovalRequest,
    CompactionState,
    ContextGauge,
    Event,
    Notice,
    SessionOpened,
    StreamRestarted,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from repl.interactive.sanitize import json_text

FORMATS = ("text", "json", "stream-json")


def decoded(arguments: str) -> Any:
    """Tool-call arguments as JSON data when they parse, else the text as sent."""
    try:
        return json.loads(arguments)
    except (TypeError, ValueError, RecursionError):
        return arguments


@dataclass
class JsonOutput:
    """Folds the run's events into the result object (and, streaming, prints each)."""

    out: TextIO
    stream: bool
    model: str
    session_id: str | None = None
    session_cost: float = 0.0
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    def _emit(self, payload: dict[str, Any]) -> None:
        self.out.write(json_text(payload) + "\n")
        self.out.flush()

    def event(self, event: Event) -> None:
        payload: dict[str, Any] | None = None
        if isinstance(event, SessionOpened):
            self.session_id = event.session_id
            self.model = event.model or self.model
            payload = {"type": "session", "session_id": event.session_id,
                       "resumed": event.resumed, "model": self.model}
        elif isinstance(event, TextDelta):
            payload = {"type": "text", "text": event.text}
        elif isinstance(event, StreamRestarted):
            payload = {"type": "stream_restarted", "reason": event.reason}
        elif isinstance(event, ToolCallStarted):
            call = {"id": event.call_id, "name": event.name,
                    "arguments": decoded(event.arguments), "ok": None, "result": None}
            self.tool_calls.append(call)
            payload = {"type": "tool_call", "id": event.call_id, "name": event.name,
                       "arguments": call["arguments"]}
        elif isinstance(event, ToolCallFinished):
            for call in self.tool_calls:
                if call["id"] == event.call_id and call["ok"] is None:
                    call.update(ok=event.ok, result=event.preview)
                    break
            else:  # finished without a start (not run): still listed
                self.tool_calls.append({"id": event.call_id, "name": event.name,
                                        "arguments": None, "ok": event.ok,
                                        "result": event.preview})
            payload = {"type": "tool_result", "id": event.call_id, "name": event.name,
                       "ok": event.ok, "result": event.preview}
        elif isinstance(event, ApprovalRequest) and not event.approved:
            payload = {"type": "approval_denied", "tool": event.tool,
                       "description": event.description}
        elif isinstance(event, Notice):
            payload = {"type": "notice", "level": event.level, "text": event.text}
        elif isinstance(event, CompactionState):
            payload = {"type": "compaction", "running": event.running}
        elif isinstance(event, ContextGauge):
            self.session_cost = event.cost_usd
        if payload is not None and self.stream:
            self._emit(payload)

    def result(
        self, outcome: str, text: str, usage: UsageTotals | None, exit_code: int
    ) -> dict[str, Any]:
        usage = usage or UsageTotals()
        answered = outcome == "answered"
        return {
            "type": "result",
            "session_id": self.session_id,
            "outcome": outcome,
            "is_error": not answered,
            "answer": text if answered else "",
            "error": None if answered else text,
            "exit_code": exit_code,
            "duration_ms": int((time.monotonic() - self.started) * 1000),
            "usage": {"model_calls": usage.calls, "input_tokens": usage.total_tokens_in,
                      "output_tokens": usage.total_tokens_out},
            "cost_usd": round(usage.total_cost_usd, 8),
            "session_cost_usd": round(self.session_cost, 8),
            "tool_calls": self.tool_calls,
            "model": self.model,
        }

    def finish(
        self, outcome: str, text: str, usage: UsageTotals | None, exit_code: int
    ) -> None:
        self._emit(self.result(outcome, text, usage, exit_code))


def failure(out: TextIO, message: str, exit_code: int, model: str) -> None:
    """The result object of a run that failed before its turn (an unknown session, a bad
    endpoint URL): so a script reading stdout always gets one."""
    JsonOutput(out, stream=False, model=model).finish("failed", message, None, exit_code)
