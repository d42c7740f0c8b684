"""Claude Code's JSONL transcripts (``~/.claude/projects/<project>/<session>.jsonl``).

Each line is an entry; conversation entries (``user``, ``assistant``, ``system``,
``progress``, ``attachment``) carry ``uuid`` and ``parentUuid``, so a file is a tree: an edit
or a rewind starts a branch, and the conversation is the chain from the latest main-chain
leaf back to the root (the rule of Anthropic's own reader in ``claude-agent-sdk-python``,
``_internal/sessions.py``). ``message`` is an Anthropic message: ``text``, ``tool_use``,
``tool_result``, ``thinking``, ``image`` blocks; one API answer is written as one entry per
content block, all with the same ``message.id``, and they are joined again here.

* A compaction writes a ``system`` entry with ``subtype: "compact_boundary"`` (no parent; its
  ``logicalParentUuid`` names the leaf before it, ``compactMetadata.preTokens`` the size),
  then a ``user`` entry with ``isCompactSummary`` holding the summary. The chain is followed
  through ``logicalParentUuid`` so the transcript keeps the whole conversation; the context
  starts at the summary.
* Sub-agents: entries with ``isSidechain`` (older versions, in the same file) are not part of
  the main chain and are left out, counted; a sub-agent's own file
  (``<session>/subagents/agent-*.jsonl``) is left out whole. The main chain holds the
  sub-agent's call (``Task``) and its answer, which is what the conversation used.
* ``isMeta`` entries (caveats the CLI adds) are left out; ``thinking`` and
  ``redacted_thinking`` blocks are dropped, counted; images are kept as a placeholder.
* Titles: the last ``custom-title`` (the user's), else an ``aiTitle``, else a ``summary``
  entry whose ``leafUuid`` is in this file (other sessions' summaries were once appended to
  files by mistake).

Pure computation over the lines :mod:`actors.store.peers._lines` read.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from actors.core.messages import Message
from actors.store.peers._draft import Compaction, Draft, call, moment, result_message
from actors.store.peers._fields import arguments, get, refuse, text
from actors.store.peers._lines import Lines

FORMAT = "claude-code"
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)
LABEL = "Claude Code transcript"
CHAIN_TYPES = frozenset({"user", "assistant", "progress", "system", "attachment"})
ENTRY_TYPES = CHAIN_TYPES | {"summary", "custom-title", "ai-title", "file-history-snapshot",
                             "queue-operation", "tag", "last-prompt", "permission-mode"}


def looks_like(value: Any) -> bool:
    """Whether a line's value is a Claude Code entry (for detection by content)."""
    if not isinstance(value, dict) or value.get("type") not in ENTRY_TYPES:
        return False
    if value.get("type") in CHAIN_TYPES:
        return "uuid" in value and ("sessionId" in value or "parentUuid" in value)
    return "payload" not in value  # Codex's lines carry a payload


@dataclass
class _Entry:
    line: int
    value: dict[str, Any]

    @property
    def uuid(self) -> str:
        return str(self.value.get("uuid"))

    @property
    def parent(self) -> str | None:
        parent = self.value.get("parentUuid")
        return parent if isinstance(parent, str) else None


def _entries(lines: Lines) -> list[_Entry]:
    entries = []
    for number, value in lines.values:
        where = lines.where(number)
        if not isinstance(value, dict):
            raise refuse(where, "the entry", "must be an object")
        kind = get(value, "type", str, where)
        if kind in CHAIN_TYPES:
            get(value, "uuid", str, where)
            get(value, "parentUuid", str, where)
            get(value, "logicalParentUuid", str, where)
            get(value, "isSidechain", bool, where)
            get(value, "isMeta", bool, where)
            if kind in ("user", "assistant"):
                message = get(value, "message", dict, where)
                if message is None:
                    raise refuse(where, "message", "must be an object")
                content = get(message, "content", (str, list), where, "message.content")
                for i, block in enumerate(content if isinstance(content, list) else ()):
                    if not isinstance(block, dict):
                        raise refuse(where, f"message.content[{i}]", "must be an object")
        entries.append(_Entry(number, value))
    return entries


def _chain(entries: list[_Entry]) -> tuple[list[_Entry], int]:
    """The main chain, root first, followed through compaction boundaries; and how many
    conversation entries are not on it because they belong to a sub-agent (sidechain)."""
    linked = [e for e in entries if e.value.get("type") in CHAIN_TYPES and e.value.get("uuid")]
    by_uuid = {e.uuid: e for e in linked}
    parents = {e.parent for e in linked if e.parent}
    leaves = []
    for terminal in (e for e in linked if e.uuid not in parents):
        seen: set[str] = set()
        current: _Entry | None = terminal
        while current is not None and current.uuid not in seen:
            seen.add(current.uuid)
            if current.value.get("type") in ("user", "assistant"):
                leaves.append(current)
                break
            current = by_uuid.get(current.parent) if current.parent else None
    main = [leaf for leaf in leaves if not leaf.value.get("isSidechain")
            and not leaf.value.get("teamName") and not leaf.value.get("isMeta")]
    if not main:
        return [], sum(1 for e in linked if e.value.get("isSidechain"))
    leaf = max(main, key=lambda e: e.line)
    chain: list[_Entry] = []
    seen = set()
    step: _Entry | None = leaf
    while step is not None and step.uuid not in seen:
        seen.add(step.uuid)
        chain.append(step)
        up = step.parent
        if up is None and step.value.get("subtype") == "compact_boundary":
            up = step.value.get("logicalParentUuid")  # the conversation before it
        step = by_uuid.get(up) if isinstance(up, str) else None
    chain.reverse()
    sidechain = sum(1 for e in linked if e.value.get("isSidechain") and e.uuid not in seen)
    return chain, sidechain


def _blocks(content: Any) -> Iterator[tuple[int, Any]]:
    if isinstance(content, str):
        yield 0, {"type": "text", "text": content}
    else:
        yield from enumerate(content)


def _block_text(block: dict[str, Any], draft: Draft, where: str, name: str) -> str:
    """A text-like block's text; an image or document as a placeholder."""
    kind = block.get("type")
    if kind == "text":
        return str(get(block, "text", str, where, f"{name}.text", default=""))
    if kind in ("image", "document"):
        draft.drop(f"{kind}s kept as placeholders")
        source = block.get("source")
        media = source.get("media_type") if isinstance(source, dict) else None
        return f"[{kind}{f' ({media})' if isinstance(media, str) else ''} not imported]"
    return ""


def _result_text(block: dict[str, Any], draft: Draft, where: str, name: str) -> str:
    content = block.get("content")
    if content is None:
        body = ""
    elif isinstance(content, str):
        body = content
    elif isinstance(content, list):
        parts = []
        for i, part in enumerate(content):
            if not isinstance(part, dict):
                raise refuse(where, f"{name}.content[{i}]", "must be an object")
            parts.append(_block_text(part, draft, where, f"{name}.content[{i}]"))
        body = "\n".join(p for p in parts if p)
    else:
        raise refuse(where, f"{name}.content", "must be text or a list")
    return f"Error: {body}" if block.get("is_error") is True else body


class _Reader:
    def __init__(self, lines: Lines, draft: Draft) -> None:
        self.lines = lines
        self.draft = draft
        self.out: list[Message] = []
        self.names: dict[str, str] = {}  # call id -> tool name
        self.answer_id: str | None = None  # message.id of the assistant message being joined
        self.usage_seen: set[str] = set()

    def user(self, entry: _Entry) -> None:
        where = self.lines.where(entry.line)
        content = entry.value["message"]["content"]
        if entry.value.get("isCompactSummary"):
            summary = "\n".join(self._texts(content, where))
            if not self.draft.compactions or self.draft.compactions[-1].summary:
                self.draft.compactions.append(Compaction(len(self.out), ""))
            self.draft.compactions[-1].summary = summary or "(empty summary)"
            self.answer_id = None
            return
        texts: list[str] = []
        for i, block in _blocks(content):
            name = f"message.content[{i}]"
            if not isinstance(block, dict):
                raise refuse(where, name, "must be an object")
            if block.get("type") == "tool_result":
                call_id = get(block, "tool_use_id", str, where, f"{name}.tool_use_id",
                              default="")
                tool = self.names.get(call_id, "unknown")
                self.out.append(result_message(call_id, tool,
                                               _result_text(block, self.draft, where, name)))
            else:
                texts.append(_block_text(block, self.draft, where, name))
        joined = "\n".join(t for t in texts if t)
        if joined.strip():
            self.out.append({"role": "user", "content": joined})
        self.answer_id = None

    def _texts(self, content: Any, where: str) -> list[str]:
        out = []
        for i, block in _blocks(content):
            if not isinstance(block, dict):
                raise refuse(where, f"message.content[{i}]", "must be an object")
            out.append(_block_text(block, self.draft, where, f"message.content[{i}]"))
        return [t for t in out if t]

    def assistant(self, entry: _Entry) -> None:
        where = self.lines.where(entry.line)
        message = entry.value["message"]
        answer_id = get(message, "id", str, where, "message.id")
        model = get(message, "model", str, where, "message.model", default="")
        if model and not model.startswith("<"):
            self.draft.model = model
        usage = message.get("usage")
        if isinstance(usage, dict) and (answer_id is None or answer_id not in self.usage_seen):
            if answer_id is not None:
                self.usage_seen.add(answer_id)
            self.draft.add_usage(
                input=usage.get("input_tokens"), output=usage.get("output_tokens"),
                cached=usage.get("cache_read_input_tokens"),
                cache_written=usage.get("cache_creation_input_tokens"), calls=1)
        texts: list[str] = []
        calls: list[dict[str, Any]] = []
        for i, block in _blocks(message["content"]):
            name = f"message.content[{i}]"
            if not isinstance(block, dict):
                raise refuse(where, name, "must be an object")
            kind = block.get("type")
            if kind in ("thinking", "redacted_thinking"):
                self.draft.drop("thinking blocks dropped")
            elif kind == "tool_use":
                call_id = get(block, "id", str, where, f"{name}.id", default="")
                tool = get(block, "name", str, where, f"{name}.name", default="")
                if not call_id or not tool:
                    raise refuse(where, f"{name}", "is a tool_use without an id or a name")
                self.names[call_id] = tool
                calls.append(call(call_id, tool, arguments(block.get("input", {}))))
            elif kind == "server_tool_use" or (isinstance(kind, str)
                                               and kind.endswith("_tool_result")):
                self.draft.drop("server tool blocks kept as text")
                texts.append(f"[{kind}: {text(block.get('input', block.get('content', '')))}]")
            else:
                texts.append(_block_text(block, self.draft, where, name))
        joined = "\n".join(t for t in texts if t)
        last = self.out[-1] if self.out else None
        if last is not None and last.get("role") == "assistant" and answer_id is not None \
                and answer_id == self.answer_id:
            if joined:  # the same answer, written block by block: one message again
                last["content"] = "\n".join(p for p in (last.get("content") or "", joined) if p)
            if calls:
                last["tool_calls"] = [*last.get("tool_calls", []), *calls]
            return
        if not joined and not calls:
            return  # only thinking: nothing the conversation kept
        message_out: Message = {"role": "assistant", "content": joined or None}
        if calls:
            message_out["tool_calls"] = calls
        self.out.append(message_out)
        self.answer_id = answer_id

    def system(self, entry: _Entry) -> None:
        if entry.value.get("subtype") != "compact_boundary":
            return
        meta = entry.value.get("compactMetadata")
        pre = meta.get("preTokens") if isinstance(meta, dict) else None
        self.draft.compactions.append(Compaction(
            len(self.out), "", moment(entry.value.get("timestamp")),
            pre if isinstance(pre, int) and not isinstance(pre, bool) and pre >= 0 else None))
        self.answer_id = None


def _title(entries: list[_Entry], known: set[str], draft: Draft) -> None:
    custom = ai = summary = ""
    for entry in entries:
        value = entry.value
        if isinstance(value.get("customTitle"), str) and value["customTitle"].strip():
            custom = value["customTitle"].strip()
        if isinstance(value.get("aiTitle"), str) and value["aiTitle"].strip():
            ai = value["aiTitle"].strip()
        if value.get("type") == "summary" and isinstance(value.get("summary"), str) \
                and value.get("leafUuid") in known:
            summary = value["summary"].strip()
    if custom:
        draft.title, draft.title_source = custom, "user"
    elif ai or summary:
        draft.title, draft.title_source = ai or summary, "model"


def read(lines: Lines) -> Draft:
    """A Claude Code transcript as a :class:`Draft`; :class:`InvalidRecord` naming the
    line and field for an entry of the wrong shape."""
    entries = _entries(lines)
    path = lines.path
    # the file is named after its session (older versions copied a resumed session's lines,
    # with their old sessionId, into the new session's file); a renamed file: its entries'
    session = path.stem if _UUID.fullmatch(path.stem) else next(
        (e.value["sessionId"] for e in reversed(entries)
         if isinstance(e.value.get("sessionId"), str) and e.value["sessionId"]), path.stem)
    draft = Draft(FORMAT, LABEL, path, session)
    draft.notes.extend(lines.notes)
    chain, sidechain = _chain(entries)
    if not chain:
        linked = [e for e in entries if e.value.get("type") in ("user", "assistant")]
        if linked and all(e.value.get("isSidechain") or e.value.get("agentId") for e in linked):
            draft.left_out = ("a sub-agent's transcript (its task and answer are in its parent "
                              "session)")
        return draft
    if path.name.startswith("agent-") and path.parent.name == "subagents":
        draft.left_out = "a sub-agent's transcript (its task and answer are in its parent session)"
        return draft
    if sidechain:
        draft.drop("sub-agent lines left out", sidechain)
    reader = _Reader(lines, draft)
    for entry in chain:
        value = entry.value
        if value.get("isMeta"):
            continue
        kind = value.get("type")
        if kind == "user":
            reader.user(entry)
        elif kind == "assistant":
            reader.assistant(entry)
        elif kind == "system":
            reader.system(entry)
        if not draft.project_root and isinstance(value.get("cwd"), str):
            draft.project_root = value["cwd"]
        if isinstance(value.get("version"), str):
            draft.version = value["version"]
    draft.messages = reader.out
    stamps = [s for s in (moment(e.value.get("timestamp")) for e in chain) if s]
    if stamps:
        draft.created_at, draft.updated_at = min(stamps), max(stamps)
    _title(entries, {e.uuid for e in entries}, draft)
    return draft
