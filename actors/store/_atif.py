"""A session as an ATIF trajectory (``--export ID --format atif``).

ATIF, the Agent Trajectory Interchange Format, is Harbor's (the Terminal-Bench project's) JSON
format for agent runs, read by evaluation and training tools; its schema is the pydantic
models of ``harbor.models.trajectories`` (RFC 0001 in the Harbor repository). The export
writes ``ATIF-v1.7``, the first version with every field used here:

* one step per transcript message, numbered from 1: the system prompt a ``system`` step, what
  the user sent a ``user`` step, each answer an ``agent`` step whose ``tool_calls`` carry the
  call ids and whose ``observation`` holds the results of those calls, linked by
  ``source_call_id`` (a result whose call is not in the step, which a valid session never
  has, becomes a ``system`` step of its own);
* ``final_metrics``: the session's tokens and cost (its own, and its forks' own: a fork's
  inherited usage is counted once, in its parent), and ``total_steps``;
* forks as sub-sessions: each fork is a complete trajectory in ``subagent_trajectories``
  (``trajectory_id`` = its session id; its own forks inside it), referred to from the
  parent's step it was cut after by an observation result's ``subagent_trajectory_ref``; the
  steps a fork copied from its parent are marked ``is_copied_context``;
* the rest of the record (title, times, project, compactions, where an imported session came
  from) in ``extra``; per-step timestamps and token counts are not recorded by the harness,
  and are left out.

Functions over the store's API (``load_session``, ``list_sessions``); synchronous like it.
"""

from __future__ import annotations

import json
from importlib import metadata
from typing import Any, Protocol

from actors.core.budget import UsageTotals
from actors.core.messages import Message, text_of
from actors.store._records import SessionRecord
from actors.store._results import ListedSession

SCHEMA_VERSION = "ATIF-v1.7"
AGENT_NAME = "agent-harness"


class Sessions(Protocol):
    """What the export needs of a store."""

    def load_session(self, session_id: str) -> SessionRecord: ...

    def list_sessions(
        self, include_archived: bool = False, *, project_root: str | None = None,
        include_empty: bool = True, limit: int | None = None,
    ) -> list[ListedSession]: ...


def _version() -> str:
    try:
        return metadata.version("agent-harness")
    except metadata.PackageNotFoundError:
        return "unknown"


def _arguments(text: str) -> dict[str, Any]:
    """A call's arguments as an object (ATIF's ``arguments`` is one): a JSON object as it
    is, anything else kept whole under ``"input"``."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        value = None
    return value if isinstance(value, dict) else {"input": text}


def _steps(transcript: list[Message], copied: int) -> tuple[list[dict[str, Any]], list[int]]:
    """The steps of a transcript, and for each message the step it is in (1-based)."""
    steps: list[dict[str, Any]] = []
    step_of: list[int] = []
    open_step: dict[str, Any] | None = None  # the agent step whose results follow
    for position, message in enumerate(transcript):
        role = message.get("role")
        if role == "tool" and open_step is not None and message.get("tool_call_id") in {
                c["tool_call_id"] for c in open_step.get("tool_calls", [])}:
            results = open_step.setdefault("observation", {"results": []})["results"]
            results.append({"source_call_id": message["tool_call_id"],
                            "content": str(message.get("content") or "")})
            if position >= copied:
                open_step.pop("is_copied_context", None)
            step_of.append(open_step["step_id"])
            continue
        step: dict[str, Any] = {"step_id": len(steps) + 1}
        if role == "assistant":
            step.update(source="agent", message=str(message.get("content") or ""))
            calls = [{"tool_call_id": c["id"], "function_name": c["function"]["name"],
                      "arguments": _arguments(c["function"]["arguments"])}
                     for c in message.get("tool_calls") or []]
            if calls:
                step["tool_calls"] = calls
            open_step = step
        elif role == "tool":  # a result whose call is not in the step before it
            step.update(source="system", message="A tool result without its call.",
                        observation={"results": [{"content": str(message.get("content") or ""),
                                                  "extra": {"tool_call_id":
                                                            message.get("tool_call_id")}}]})
            open_step = None
        else:
            step.update(source="system" if role == "system" else "user",
                        message=text_of(message))
            open_step = None
        if position < copied:
            step["is_copied_context"] = True
        steps.append(step)
        step_of.append(step["step_id"])
    return steps, step_of


def _common_prefix(a: list[Message], b: list[Message]) -> int:
    n = 0
    while n < len(a) and n < len(b) and a[n] == b[n]:
        n += 1
    return n


def _trajectory(store: Sessions, session_id: str, children: dict[str, list[str]],
                parent_transcript: list[Message] | None, seen: set[str]) -> dict[str, Any]:
    record = store.load_session(session_id)
    seen.add(session_id)
    transcript: list[Message] = list(record["transcript"])
    copied = _common_prefix(transcript, parent_transcript) if parent_transcript else 0
    steps, step_of = _steps(transcript, copied)
    usage = UsageTotals.from_state(record["state"])
    origin = record["state"].get("origin")
    agent: dict[str, Any] = {"name": AGENT_NAME, "version": _version()}
    if isinstance(origin, dict) and isinstance(origin.get("model"), str):
        agent["model_name"] = origin["model"]
    subs = []
    cost, tokens_in, tokens_out = usage.total_cost_usd, usage.total_tokens_in, \
        usage.total_tokens_out
    for child in children.get(session_id, []):
        if child in seen:
            continue
        sub = _trajectory(store, child, children, transcript, seen)
        subs.append(sub)
        totals = sub["final_metrics"]
        cost += totals["total_cost_usd"]
        tokens_in += totals["total_prompt_tokens"]
        tokens_out += totals["total_completion_tokens"]
        point = sub["extra"]["fork_point"]
        at = step_of[min(point, len(step_of)) - 1] if point and step_of else len(steps)
        observation = steps[at - 1].setdefault("observation", {"results": []})
        observation["results"].append({
            "content": f"Forked here as session {child}"
                       + (f" (after message {point})" if point else " (a whole copy)"),
            "subagent_trajectory_ref": [{"trajectory_id": child, "session_id": child,
                                         "extra": {"relation": "fork", "fork_point": point}}],
        })
    extra: dict[str, Any] = {
        key: record[key] for key in ("title", "summary", "created_at", "updated_at", "status",
                                     "project_root", "parent_id", "fork_point", "archived")
    }
    extra["compactions"] = record["compactions"]
    extra["model_calls"] = usage.calls
    if isinstance(origin, dict):
        extra["imported_from"] = origin
    trajectory: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "session_id": session_id,
        "trajectory_id": session_id,
        "agent": agent,
        "steps": steps,
        "final_metrics": {
            "total_prompt_tokens": tokens_in,
            "total_completion_tokens": tokens_out,
            "total_cost_usd": round(cost, 8),
            "total_steps": len(steps),
        },
        "extra": extra,
    }
    if subs:
        trajectory["subagent_trajectories"] = subs
    return trajectory


def to_atif(store: Sessions, session_id: str) -> dict[str, Any]:
    """The session ``session_id`` as an ATIF trajectory, its forks embedded (see the
    module's doc)."""
    children: dict[str, list[str]] = {}
    for item in sorted(store.list_sessions(include_archived=True),
                       key=lambda s: str(s["created_at"])):
        if item.get("parent_id"):
            children.setdefault(str(item["parent_id"]), []).append(str(item["id"]))
    return _trajectory(store, session_id, children, None, set())
