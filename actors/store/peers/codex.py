"""Codex CLI's rollout files (``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl``).

Each line is ``{"timestamp", "type", "payload"}`` (``RolloutLine`` in ``openai/codex``):

* ``session_meta``: the session's ``id``, ``cwd``, ``cli_version``, ``forked_from_id`` (a fork
  of another rollout) and ``source`` (``{"subagent": …}`` for a sub-agent's own rollout,
  which is left out whole: its task and answer are in its parent's);
* ``response_item``: the model's history in the Responses API's items: ``message`` (roles
  ``user``, ``assistant``; ``developer`` and ``system`` messages are Codex's own instructions
  and are left out, as are the user-role blocks Codex adds itself: ``<environment_context>``,
  ``<user_instructions>``, AGENTS.md …), ``function_call`` / ``custom_tool_call`` /
  ``local_shell_call`` and their ``*_output`` joined by ``call_id``, ``reasoning`` (dropped,
  counted; its ``encrypted_content`` can only be read by OpenAI), ``web_search_call`` (kept
  as text);
* ``compacted``: a compaction; its ``message`` is the summary the context continues from
  (when it is empty the summary was opaque, and the context keeps the whole history: the
  harness compacts it by its own rules when it must);
* ``turn_context``: the ``model`` of each turn; ``event_msg``: ``token_count`` (cumulative
  usage), ``thread_name_updated`` (the title), ``thread_rolled_back`` (the last turns were
  undone: left out here too); the rest repeats the items for the UI and is not needed.

Older rollouts (2025) have no envelope: a first line ``{"id", "timestamp", …}`` and then the
items themselves; they are read the same way.

Pure computation over the lines :mod:`actors.store.peers._lines` read.
"""

from __future__ import annotations

from typing import Any

from actors.core.messages import Message
from actors.store.peers._draft import Compaction, Draft, call, moment, result_message
from actors.store.peers._fields import arguments, get, refuse, text
from actors.store.peers._lines import Lines

FORMAT = "codex"
LABEL = "Codex CLI rollout"
LINE_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context",
                        "compacted"})
ITEM_TYPES = frozenset({"message", "reasoning", "function_call", "function_call_output",
                        "custom_tool_call", "custom_tool_call_output", "local_shell_call",
                        "web_search_call", "compaction", "compaction_summary",
                        "tool_search_call", "tool_search_output", "image_generation_call"})
CONTEXT_PREFIXES = ("<environment_context>", "<user_instructions>", "# agents.md instructions",
                    "<instructions>", "<skill>", "<user_shell_command>", "<turn_aborted>",
                    "<subagent_notification>", "<context_update>", "<permissions instructions>")


def looks_like(value: Any) -> bool:
    """Whether a line's value is a Codex rollout line (for detection by content)."""
    if not isinstance(value, dict):
        return False
    if value.get("type") in LINE_TYPES and "payload" in value and "timestamp" in value:
        return True
    # an older rollout's first line: the session's id and time, no type
    return ("type" not in value and isinstance(value.get("id"), str)
            and "timestamp" in value and ("instructions" in value or "git" in value))


def _content_text(content: Any, draft: Draft, where: str, name: str) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise refuse(where, name, "must be a list")
    parts = []
    for i, item in enumerate(content):
        if not isinstance(item, dict):
            raise refuse(where, f"{name}[{i}]", "must be an object")
        kind = item.get("type")
        if kind in ("input_text", "output_text", "text"):
            parts.append(str(get(item, "text", str, where, f"{name}[{i}].text", default="")))
        elif kind in ("input_image", "image"):
            draft.drop("images kept as placeholders")
            parts.append("[image not imported]")
        elif kind == "input_file":
            draft.drop("files kept as placeholders")
            parts.append("[file not imported]")
    return "\n".join(p for p in parts if p)


def _output_text(output: Any, draft: Draft, where: str) -> str:
    if isinstance(output, dict):  # older rollouts: {"content": …, "success": …}
        body = text(output.get("content", ""))
        return f"Error: {body}" if output.get("success") is False else body
    if isinstance(output, list):
        return _content_text(output, draft, where, "payload.output")
    return text(output) if output is not None else ""


class _Reader:
    def __init__(self, lines: Lines, draft: Draft) -> None:
        self.lines = lines
        self.draft = draft
        self.out: list[Message] = []
        self.names: dict[str, str] = {}

    def _add_call(self, call_id: str, name: str, args: str) -> None:
        self.names[call_id] = name
        last = self.out[-1] if self.out else None
        if last is not None and last.get("role") == "assistant":
            last["tool_calls"] = [*last.get("tool_calls", []), call(call_id, name, args)]
        else:
            self.out.append({"role": "assistant", "content": None,
                             "tool_calls": [call(call_id, name, args)]})

    def item(self, item: dict[str, Any], where: str) -> None:
        kind = item.get("type")
        draft = self.draft
        if kind == "message":
            role = get(item, "role", str, where, "payload.role", default="")
            body = _content_text(item.get("content", []), draft, where, "payload.content")
            if role == "assistant":
                if body:
                    self.out.append({"role": "assistant", "content": body})
            elif role == "user":
                if body.strip().lower().startswith(CONTEXT_PREFIXES):
                    draft.drop("Codex context blocks left out")
                elif body.strip():
                    self.out.append({"role": "user", "content": body})
            else:
                draft.drop("Codex instruction messages left out")
        elif kind == "reasoning":
            draft.drop("reasoning items dropped")
        elif kind in ("function_call", "custom_tool_call", "local_shell_call"):
            call_id = get(item, "call_id", str, where, "payload.call_id") or get(
                item, "id", str, where, "payload.id", default="")
            name = get(item, "name", str, where, "payload.name", default="") or (
                "local_shell" if kind == "local_shell_call" else "")
            if not call_id or not name:
                raise refuse(where, "payload", f"is a {kind} without a call_id or a name")
            raw = item.get("arguments") if kind == "function_call" else (
                item.get("input") if kind == "custom_tool_call" else item.get("action"))
            self._add_call(call_id, name, arguments(raw if raw is not None else {}))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            call_id = get(item, "call_id", str, where, "payload.call_id", default="")
            name = self.names.get(call_id, "unknown")
            self.out.append(result_message(call_id, name,
                                           _output_text(item.get("output"), draft, where)))
        elif kind == "web_search_call":
            action = item.get("action")
            query = action.get("query") if isinstance(action, dict) else None
            draft.drop("web searches kept as text")
            self.out.append({"role": "assistant",
                             "content": f"[searched the web: {text(query or '')}]"})
        elif kind in ("compaction", "compaction_summary"):
            draft.drop("encrypted compaction items dropped")
        elif isinstance(kind, str):
            draft.drop(f"{kind} items left out")

    def rolled_back(self, turns: int) -> None:
        """Codex undid the last ``turns`` user turns: the history ends before them."""
        users = [i for i, m in enumerate(self.out) if m.get("role") == "user"]
        if 0 < turns <= len(users):
            del self.out[users[-turns]:]
            self.draft.notes.append(f"{turns} turn(s) undone in Codex left out")


def read(lines: Lines) -> Draft:
    """A Codex rollout as a :class:`Draft`; :class:`InvalidRecord` naming the line and
    field for a line of the wrong shape."""
    path = lines.path
    draft = Draft(FORMAT, LABEL, path, "")
    draft.notes.extend(lines.notes)
    reader = _Reader(lines, draft)
    stamps: list[str] = []
    meta_seen = False
    for number, value in lines.values:
        where = lines.where(number)
        if not isinstance(value, dict):
            raise refuse(where, "the line", "must be an object")
        if "record_type" in value:
            continue  # older rollouts' state lines
        stamp = moment(value.get("timestamp"))
        if stamp:
            stamps.append(stamp)
        if "payload" in value:
            kind = get(value, "type", str, where)
            payload = get(value, "payload", dict, where)
        elif value.get("type") in ITEM_TYPES:
            kind, payload = "response_item", value  # older rollouts: the item itself
        elif number == lines.values[0][0] and "id" in value:
            kind, payload = "session_meta", value
        else:
            continue
        if payload is None:
            raise refuse(where, "payload", "must be an object")
        if kind == "session_meta":
            if meta_seen:
                continue  # a fork copies its parent's lines after its own
            meta_seen = True
            draft.source_id = get(payload, "id", str, where, "payload.id", default="")
            draft.project_root = get(payload, "cwd", str, where, "payload.cwd", default="")
            draft.version = get(payload, "cli_version", str, where, "payload.cli_version",
                                default="")
            draft.parent_source_id = get(payload, "forked_from_id", str, where,
                                         "payload.forked_from_id")
            source = payload.get("source")
            if isinstance(source, dict) and ("subagent" in source or "sub_agent" in source):
                draft.left_out = ("a sub-agent's rollout (its task and answer are in its parent "
                                  "session)")
                return draft
        elif kind == "response_item":
            reader.item(payload, where)
        elif kind == "turn_context":
            model = get(payload, "model", str, where, "payload.model", default="")
            if model:
                draft.model = model
        elif kind == "compacted":
            summary = get(payload, "message", str, where, "payload.message", default="")
            if summary.strip():
                draft.compactions.append(Compaction(len(reader.out), summary, stamp))
            else:
                draft.notes.append("a compaction whose summary only OpenAI can read: the "
                                   "context keeps the history before it")
        elif kind == "event_msg":
            _event(payload, reader, where)
    if not draft.source_id:
        draft.source_id = path.stem.split("-", 6)[-1] if path.stem.startswith("rollout-") \
            else path.stem
    draft.messages = reader.out
    if stamps:
        draft.created_at, draft.updated_at = min(stamps), max(stamps)
    return draft


def _event(payload: dict[str, Any], reader: _Reader, where: str) -> None:
    kind = payload.get("type")
    draft = reader.draft
    if kind == "token_count":
        info = payload.get("info")
        total = info.get("total_token_usage") if isinstance(info, dict) else None
        if isinstance(total, dict):  # cumulative: the last one is the session's
            draft.usage.clear()
            draft.add_usage(input=total.get("input_tokens"), output=total.get("output_tokens"),
                            cached=total.get("cached_input_tokens"))
    elif kind == "thread_name_updated":
        name = get(payload, "thread_name", str, where, "payload.thread_name", default="")
        if name.strip():
            draft.title, draft.title_source = name.strip(), "user"
    elif kind == "thread_rolled_back":
        turns = get(payload, "num_turns", int, where, "payload.num_turns", default=0)
        reader.rolled_back(turns)
