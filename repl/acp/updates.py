"""What the client is told: the supervisor's events and a saved conversation as ACP
``session/update`` payloads, and a prompt's content blocks as the message the model gets.

One update per event that has an ACP counterpart: text and reasoning as message and thought
chunks, a tool call as ``tool_call`` (its kind, a title, the file it touches, an edit's change
as a diff) and its end as ``tool_call_update`` (completed, or failed with why: denied,
interrupted, not started…, and the result's text), the to-do list as ``plan``, the title as
``session_info_update``, the context gauge as ``usage_update``. Notices and compaction have
none (they go to the log). A saved conversation (``session/load``) is replayed with the same
updates, the user's messages as typed; the system prompt is left out, and a compaction's
summary is a thought. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from acp import (
    plan_entry,
    start_tool_call,
    text_block,
    tool_content,
    tool_diff_content,
    update_agent_message_text,
    update_agent_thought_text,
    update_plan,
    update_tool_call,
    update_user_message_text,
)
from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AgentThoughtChunk,
    ContentToolCallContent,
    Cost,
    EmbeddedResourceContentBlock,
    FileEditToolCallContent,
    PlanEntry,
    PlanEntryStatus,
    ResourceContentBlock,
    SessionInfoUpdate,
    TerminalToolCallContent,
    TextContentBlock,
    TextResourceContents,
    ToolCallLocation,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
    ToolKind,
    UsageUpdate,
    UserMessageChunk,
)

from actors.core.carried import PINNED_HEADER, SUMMARY_CLOSE, SUMMARY_HEADER, SUMMARY_OPEN
from actors.core.data_tags import escape_attribute, escape_data
from actors.core.events import (
    ContextGauge,
    Event,
    PlanningChanged,
    ReasoningDelta,
    ReasoningRevealed,
    StreamRestarted,
    TextDelta,
    TitleChanged,
    ToolCallFinished,
    ToolCallStarted,
)
from actors.core.messages import INTERRUPTED_NOTICE, NOT_STARTED_NOTICE, tool_calls_of
from actors.core.previews import own_user_text
from repl.headless import decoded

Update = (
    UserMessageChunk | AgentMessageChunk | AgentThoughtChunk | ToolCallStart | ToolCallProgress
    | AgentPlanUpdate | SessionInfoUpdate | UsageUpdate
)

KINDS: dict[str, ToolKind] = {
    "read_file": "read", "read_memory": "read", "read_session": "read",
    "read_scratchpad": "read", "todo_list": "read",
    "glob_files": "search", "grep": "search", "list_sessions": "search",
    "search_sessions": "search",
    "write_file": "edit", "edit_file": "edit",
    "run_bash": "execute",
    "todo_append": "think", "todo_update": "think", "write_scratchpad": "think",
}
_FAILED = ("Error:", "Denied:", INTERRUPTED_NOTICE, NOT_STARTED_NOTICE)
_TITLE_CHARS = 120


def _arguments(raw: Any) -> dict[str, Any]:
    """A call's arguments as an object ({} when they are not one)."""
    value = decoded(raw) if isinstance(raw, str) else raw
    return value if isinstance(value, dict) else {}


def call_title(name: str, arguments: Mapping[str, Any]) -> str:
    """What a call does, on one line: ``run_bash: pytest -q``, ``edit_file: src/a.py``."""
    command, path = arguments.get("command"), arguments.get("path")
    pattern = arguments.get("pattern")
    if name == "run_bash" and isinstance(command, str):
        title = f"run_bash: {command}"
    elif isinstance(pattern, str):
        title = f"{name}: {pattern}" + (f" in {path}" if isinstance(path, str) else "")
    elif isinstance(path, str):
        title = f"{name}: {path}"
    else:
        title = name
    title = " ".join(title.split())
    return title if len(title) <= _TITLE_CHARS else title[: _TITLE_CHARS - 1] + "…"


@dataclass(frozen=True)
class CallShape:
    """What the client is shown of a call before it runs: kind, title, files, change."""

    kind: ToolKind
    title: str
    locations: list[ToolCallLocation] | None
    content: list[ContentToolCallContent | FileEditToolCallContent | TerminalToolCallContent] | None
    raw_input: dict[str, Any]

    @classmethod
    def of(cls, name: str, raw: Any, project: Path) -> CallShape:
        arguments = _arguments(raw)
        path = arguments.get("path")
        locations: list[ToolCallLocation] | None = None
        content: list[ContentToolCallContent | FileEditToolCallContent
                      | TerminalToolCallContent] | None = None
        if isinstance(path, str) and path:
            where = str(project / path)  # absolute, as ACP wants (an absolute path stays so)
            locations = [ToolCallLocation(path=where)]
            old, new = arguments.get("old_string"), arguments.get("new_string")
            if name == "edit_file" and isinstance(old, str) and isinstance(new, str):
                content = [tool_diff_content(where, new, old)]
            elif name == "write_file" and isinstance(arguments.get("content"), str):
                content = [tool_diff_content(where, arguments["content"])]
        return cls(KINDS.get(name, "other"), call_title(name, arguments), locations, content,
                   arguments)

    def started(self, call_id: str, status: Any = "in_progress") -> ToolCallStart:
        return start_tool_call(call_id, self.title, kind=self.kind, status=status,
                               content=self.content, locations=self.locations,
                               raw_input=self.raw_input)

    def asked(self, call_id: str) -> ToolCallUpdate:
        """The call as a permission request shows it."""
        return ToolCallUpdate(tool_call_id=call_id, title=self.title, kind=self.kind,
                              status="pending", content=self.content,
                              locations=self.locations, raw_input=self.raw_input)


def finished(call_id: str, ok: bool, text: str, status: str = "") -> ToolCallProgress:
    """The end of a call: completed or failed, with the result's text."""
    return update_tool_call(
        call_id, status="completed" if ok else "failed",
        content=[tool_content(text_block(text))] if text else None,
        raw_output={"status": status or ("done" if ok else "failed")},
    )


def event_update(event: Event, project: Path) -> Update | None:
    """The update for one event (None: it has no ACP counterpart)."""
    if isinstance(event, TextDelta):
        return update_agent_message_text(event.text)
    if isinstance(event, ReasoningDelta | ReasoningRevealed):
        return update_agent_thought_text(event.text)
    if isinstance(event, StreamRestarted):  # the text shown so far cannot be taken back
        return update_agent_message_text(f"\n\n[the stream broke ({event.reason}); "
                                         "the answer starts again]\n\n")
    if isinstance(event, ToolCallStarted):
        return CallShape.of(event.name, event.arguments, project).started(event.call_id)
    if isinstance(event, ToolCallFinished):
        return finished(event.call_id, event.ok, event.output or event.preview, event.status)
    if isinstance(event, TitleChanged):
        return SessionInfoUpdate(session_update="session_info_update", title=event.title)
    if isinstance(event, PlanningChanged):
        return update_plan(plan_entries(event.todos))
    if isinstance(event, ContextGauge):
        return UsageUpdate(session_update="usage_update", used=event.tokens, size=event.budget,
                           cost=Cost(amount=event.cost_usd, currency="USD"))
    return None


_TODO = re.compile(r"^\d+\. \[(\w+)\] (.*?)(?: \(retries: \d+\))?$")
_PLAN_STATUS: dict[str, PlanEntryStatus] = {
    "pending": "pending", "failed": "pending", "in_progress": "in_progress",
    "done": "completed", "cancelled": "completed",
}


def plan_entries(todos: str) -> list[PlanEntry]:
    """The to-do list (``PlanningChanged``: one ``N. [status] text`` line each, ``No
    to-dos.`` when empty) as the entries of an ACP plan; a failed to-do is open again, a
    cancelled one closed."""
    entries: list[PlanEntry] = []
    for line in todos.splitlines():
        found = _TODO.match(line)
        if found is not None:
            status = _PLAN_STATUS.get(found.group(1), "pending")
            entries.append(plan_entry(found.group(2), status=status))
        elif entries:  # a to-do's text on several lines
            entries[-1].content += "\n" + line
    return entries


# -- a saved conversation ---------------------------------------------------------------


def _unwrapped(content: str) -> str:
    """A tool result's text without its ``<tool_result>`` wrapper."""
    if content.startswith("<tool_result") and content.endswith("\n</tool_result>"):
        first = content.find("\n")
        return content[first + 1 : -len("\n</tool_result>")]
    return content


def _carried(content: str) -> str:
    """A compaction's summary or the pinned block, as the thought that shows it."""
    if content.startswith(SUMMARY_OPEN):
        body = content[len(SUMMARY_OPEN):].removesuffix(SUMMARY_CLOSE)
        return "Summary of the earlier conversation:\n" + body.removeprefix(SUMMARY_HEADER)
    return content.replace(PINNED_HEADER, "Pinned instructions:\n", 1)


def replay(messages: Sequence[Mapping[str, Any]], project: Path) -> Iterator[Update]:
    """A conversation's messages as the updates that show it (``session/load``)."""
    names: dict[str, str] = {}
    for message in messages:
        role, content = message.get("role"), message.get("content")
        if role == "user":
            typed = own_user_text(message)
            if typed is not None:
                yield update_user_message_text(typed)
            elif isinstance(content, str):
                yield update_agent_thought_text(_carried(content))
        elif role == "assistant":
            if isinstance(content, str) and content:
                yield update_agent_message_text(content)
            for call in tool_calls_of(message):
                function = call.get("function") or {}
                name, call_id = str(function.get("name", "")), str(call.get("id", ""))
                names[call_id] = name
                yield CallShape.of(name, function.get("arguments"), project).started(
                    call_id, "pending")
        elif role == "tool":
            text = _unwrapped(str(content or ""))
            call_id = str(message.get("tool_call_id", ""))
            yield finished(call_id, not text.startswith(_FAILED), text)


# -- a prompt ---------------------------------------------------------------------------

PromptBlock = Any  # the SDK's union of content blocks


def _named(uri: str, project: Path) -> str:
    """A resource's name as the user would type it: a file of the project by its path in
    it, any other by its URI."""
    if not uri.startswith("file://"):
        return uri
    path = Path(unquote(urlsplit(uri).path))
    return str(path.relative_to(project)) if path.is_relative_to(project) else str(path)


def prompt_text(blocks: Sequence[PromptBlock], project: Path) -> tuple[str, str]:
    """(what the model gets, what the user typed) of a prompt's blocks. Text is taken as it
    is and a resource as its ``@name``; an embedded text resource is attached after the text
    as data, as an ``@path`` attachment is; anything else (an image, audio, a binary
    resource: not offered in the capabilities) is noted as left out."""
    typed: list[str] = []
    attached: list[str] = []
    for block in blocks:
        if isinstance(block, TextContentBlock):
            typed.append(block.text)
        elif isinstance(block, ResourceContentBlock):
            typed.append("@" + _named(block.uri, project))
        elif isinstance(block, EmbeddedResourceContentBlock) and isinstance(
            block.resource, TextResourceContents
        ):
            name = _named(block.resource.uri, project)
            typed.append("@" + name)
            attached.append(f'<attached_file path="{escape_attribute(name)}">\n'
                            f"{escape_data(block.resource.text)}\n</attached_file>")
        else:
            typed.append(f"[{getattr(block, 'type', 'content')} left out: text only]")
    shown = "".join(typed)
    return (shown + "\n\n" + "\n".join(attached) if attached else shown), shown
