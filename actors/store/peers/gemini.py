"""Gemini CLI's saved chats: its session recordings and its ``/chat save`` checkpoints.

Session recordings live in ``~/.gemini/tmp/<project>/chats/`` (``ChatRecordingService`` in
``google-gemini/gemini-cli``, ``packages/core/src/services/chatRecording*.ts``):

* ``session-<time>-<id>.jsonl`` (current): a first line of metadata (``sessionId``,
  ``projectHash``, ``startTime``, ``kind``…), then message records (``id``, ``timestamp``,
  ``type``: ``user``, ``gemini``, or ``info``/``error``/``warning`` for the UI only), and
  updates: a record written again under its id replaces it, ``{"$rewindTo": id}`` drops it
  and everything after, ``{"$set": {…}}`` changes metadata (``summary``: the title) and,
  with ``messages``, replaces the whole history (after a compression: the messages it no
  longer holds stay in the transcript, and the new turns it starts with are its summary);
* ``session-<time>-<id>.json`` (before 2026): the same conversation as one JSON document.

A ``gemini`` record carries ``toolCalls`` (``id``, ``name``, ``args``, ``status``, ``result``:
Gemini API parts whose ``functionResponse.response`` holds ``output`` or ``error``); a call
still ``scheduled``, ``validating``, ``awaiting_approval`` or ``executing`` has no result and
gets the harness's "interrupted" one. ``thoughts`` are dropped, counted; ``tokens`` and
``model`` are recorded. A sub-agent's recording (``kind: "subagent"``, in
``chats/<parent id>/``) is left out whole: its task and answer are in its parent's.
The project is not in the file (only its hash): it is read from the ``.project_root`` file
Gemini CLI keeps in the project's directory, when there is one.

``/chat save TAG`` writes ``checkpoint-TAG.json`` in the same project directory: the API
history itself (``{"history": [{"role": "user"|"model", "parts": […]}]}``, or the bare list
in older versions). It has no session id: the file's path stands for one.

Pure computation over values :mod:`actors.store.peers._lines` read.
"""

from __future__ import annotations

from typing import Any

from actors.core.messages import Message
from actors.store.peers._draft import Compaction, Draft, call, moment, result_message
from actors.store.peers._fields import arguments, get, refuse, text
from actors.store.peers._lines import Lines

FORMAT = "gemini"
LABEL = "Gemini CLI chat"
CHECKPOINT_LABEL = "Gemini CLI saved chat (/chat save)"
OPEN_STATUSES = frozenset({"scheduled", "validating", "awaiting_approval", "executing"})


def looks_like(value: Any) -> bool:
    """Whether a value is a Gemini CLI recording's metadata (first line or whole file)."""
    return (isinstance(value, dict) and isinstance(value.get("sessionId"), str)
            and isinstance(value.get("projectHash"), str))


def looks_like_checkpoint(value: Any) -> bool:
    """Whether a whole file's value is a ``/chat save`` checkpoint (API history)."""
    history = value.get("history") if isinstance(value, dict) else value
    if isinstance(value, dict) and set(value) - {"history", "authType"}:
        return False
    return (isinstance(history, list) and bool(history)
            and all(isinstance(c, dict) and c.get("role") in ("user", "model")
                    and isinstance(c.get("parts"), list) for c in history))


def _parts(content: Any, where: str, name: str) -> list[dict[str, Any]]:
    """A ``PartListUnion`` as a list of parts (a string is one text part)."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"text": content}]
    if isinstance(content, dict):
        return [content]
    if not isinstance(content, list):
        raise refuse(where, name, "must be text, a part or a list of parts")
    parts = []
    for i, part in enumerate(content):
        if isinstance(part, str):
            parts.append({"text": part})
        elif isinstance(part, dict):
            parts.append(part)
        else:
            raise refuse(where, f"{name}[{i}]", "must be text or an object")
    return parts


def _response_text(part: dict[str, Any]) -> str:
    response = part["functionResponse"].get("response")
    if isinstance(response, dict):
        if "output" in response:
            return text(response["output"])
        if "error" in response:
            return f"Error: {text(response['error'])}"
    return text(response) if response is not None else ""


class _Converter:
    """Gemini records (or API contents) to chat messages."""

    def __init__(self, draft: Draft) -> None:
        self.draft = draft
        self.out: list[Message] = []
        self.names: dict[str, str] = {}
        self.open: list[str] = []  # calls of the last answer still without a result
        self.counter = 0

    def _new_id(self, name: str) -> str:
        self.counter += 1
        return f"{name}-{self.counter}"

    def _text(self, part: dict[str, Any]) -> str:
        if isinstance(part.get("text"), str):
            if part.get("thought") is True:
                self.draft.drop("thinking parts dropped")
                return ""
            return str(part["text"])
        if "inlineData" in part or "fileData" in part:
            self.draft.drop("images or files kept as placeholders")
            data = part.get("inlineData") or part.get("fileData")
            mime = data.get("mimeType") if isinstance(data, dict) else None
            return f"[{mime if isinstance(mime, str) else 'file'} not imported]"
        return ""

    def user(self, parts: list[dict[str, Any]], where: str, name: str) -> None:
        texts = []
        for i, part in enumerate(parts):
            response = part.get("functionResponse")
            if isinstance(response, dict):
                call_id = get(response, "id", str, where, f"{name}[{i}].functionResponse.id",
                              default="")
                tool = get(response, "name", str, where,
                           f"{name}[{i}].functionResponse.name", default="unknown")
                if not call_id:  # older histories: answered in the order of the calls
                    call_id = next((c for c in self.open if self.names.get(c) == tool),
                                   self.open[0] if self.open else self._new_id(tool))
                if call_id in self.open:
                    self.open.remove(call_id)
                elif call_id in self.names:
                    continue  # answered already by its call's record (a history synced back)
                self.out.append(result_message(call_id, self.names.get(call_id, tool),
                                               _response_text(part)))
            else:
                texts.append(self._text(part))
        joined = "\n".join(t for t in texts if t)
        if joined.strip():
            self.out.append({"role": "user", "content": joined})

    def model(self, parts: list[dict[str, Any]], records: list[Any], where: str) -> None:
        texts: list[str] = []
        calls: list[dict[str, Any]] = []
        results: list[Message] = []
        recorded = {r.get("id") for r in records if isinstance(r, dict)}
        for i, part in enumerate(parts):
            function = part.get("functionCall")
            if isinstance(function, dict) and function.get("id") in recorded:
                continue  # the same call as one of its records (a history synced back)
            if isinstance(function, dict):
                tool = get(function, "name", str, where, f"content[{i}].functionCall.name",
                           default="")
                call_id = get(function, "id", str, where, f"content[{i}].functionCall.id",
                              default="") or self._new_id(tool or "call")
                calls.append(call(call_id, tool or "unknown", arguments(function.get("args", {}))))
                self.names[call_id] = tool or "unknown"
            else:
                texts.append(self._text(part))
        for i, record in enumerate(records):
            name = f"toolCalls[{i}]"
            if not isinstance(record, dict):
                raise refuse(where, name, "must be an object")
            call_id = get(record, "id", str, where, f"{name}.id", default="")
            tool = get(record, "name", str, where, f"{name}.name", default="")
            if not call_id or not tool:
                raise refuse(where, name, "is a tool call without an id or a name")
            status = get(record, "status", str, where, f"{name}.status", default="")
            self.names[call_id] = tool
            calls.append(call(call_id, tool, arguments(record.get("args", {}))))
            result = _parts(record.get("result"), where, f"{name}.result")
            if result and status not in OPEN_STATUSES:
                body = "\n".join(
                    _response_text(p) if isinstance(p.get("functionResponse"), dict)
                    else self._text(p) for p in result)
                results.append(result_message(call_id, tool, body))
        joined = "\n".join(t for t in texts if t)
        if not joined and not calls:
            return
        message: Message = {"role": "assistant", "content": joined or None}
        if calls:
            message["tool_calls"] = calls
        self.out.append(message)
        answered = {r["tool_call_id"] for r in results}
        self.open = [c["id"] for c in calls if c["id"] not in answered]
        self.out.extend(results)

    def record(self, record: dict[str, Any], where: str) -> None:
        kind = record.get("type")
        parts = _parts(record.get("content"), where, "content")
        if kind == "user":
            self.user(parts, where, "content")
        elif kind == "gemini":
            calls = get(record, "toolCalls", list, where, default=[])
            if record.get("thoughts"):
                self.draft.drop("thinking parts dropped",
                                len(record["thoughts"]) if isinstance(record["thoughts"], list)
                                else 1)
            model = get(record, "model", str, where, default="")
            if model:
                self.draft.model = model
            tokens = record.get("tokens")
            if isinstance(tokens, dict):
                self.draft.add_usage(input=tokens.get("input"), output=tokens.get("output"),
                                     cached=tokens.get("cached"), calls=1)
            self.model(parts, calls, where)


def _texts_of(record: dict[str, Any]) -> str:
    parts = record.get("content")
    if isinstance(parts, str):
        return parts
    if isinstance(parts, list):
        return "\n".join(p["text"] for p in parts if isinstance(p, dict)
                         and isinstance(p.get("text"), str))
    return ""


class _History:
    """Gemini CLI's own reading of a recording: records by id, rewinds, replacements."""

    def __init__(self, draft: Draft) -> None:
        self.draft = draft
        self.current: dict[str, tuple[str, dict[str, Any]]] = {}  # id -> (where, record)
        self.archive: list[tuple[str, dict[str, Any]]] = []  # compressed away, in order
        self.boundaries: list[tuple[int, str, str]] = []  # (archived before, summary, when)
        self.metadata: dict[str, Any] = {}
        self.rewound = 0

    def add(self, record: dict[str, Any], where: str) -> None:
        self.current[record["id"]] = (where, record)  # a known id keeps its place

    def rewind(self, to: str) -> None:
        ids = list(self.current)
        cut = ids.index(to) if to in ids else 0
        for gone in ids[cut:]:
            del self.current[gone]
            self.rewound += 1

    def replace(self, messages: list[Any], where: str, when: str) -> None:
        new = [m for m in messages if isinstance(m, dict) and isinstance(m.get("id"), str)]
        ids = {m["id"] for m in new}
        removed = [entry for key, entry in self.current.items() if key not in ids]
        if not removed:
            self.current = {m["id"]: (where, m) for m in new}
            return
        self.archive.extend(removed)
        summary_turns = []
        for m in new:  # the new turns it starts with: the compression's summary
            if m["id"] in self.current:
                break
            summary_turns.append(m)
        summary = "\n".join(_texts_of(m) for m in summary_turns if m.get("type") == "user")
        self.boundaries.append((len(self.archive), summary.strip() or "(compressed)", when))
        kept = new[len(summary_turns):] if summary.strip() else new
        self.current = {m["id"]: (where, m) for m in kept}


def _apply_metadata(draft: Draft, metadata: dict[str, Any]) -> None:
    if isinstance(metadata.get("sessionId"), str):
        draft.source_id = metadata["sessionId"]
    if isinstance(metadata.get("summary"), str) and metadata["summary"].strip():
        draft.title, draft.title_source = metadata["summary"].strip(), "model"
    draft.created_at = moment(metadata.get("startTime")) or draft.created_at
    draft.updated_at = moment(metadata.get("lastUpdated")) or draft.updated_at


def read(lines: Lines, project_root: str = "") -> Draft:
    """A Gemini CLI recording (JSONL, or the older one-document JSON as a single value)."""
    draft = Draft(FORMAT, LABEL, lines.path, "", project_root=project_root)
    draft.notes.extend(lines.notes)
    history = _History(draft)
    for number, value in lines.values:
        where = lines.where(number)
        if not isinstance(value, dict):
            raise refuse(where, "the record", "must be an object")
        if isinstance(value.get("$rewindTo"), str):
            history.rewind(value["$rewindTo"])
        elif isinstance(value.get("id"), str):
            get(value, "type", str, where)
            history.add(value, where)
        elif "$set" in value:
            update = get(value, "$set", dict, where)
            if isinstance(update.get("messages"), list):
                history.replace(update["messages"], where, moment(update.get("lastUpdated")))
            history.metadata.update({k: v for k, v in update.items() if k != "messages"})
        elif looks_like(value):
            history.metadata.update({k: v for k, v in value.items() if k != "messages"})
            messages = get(value, "messages", list, where, default=[])
            for i, message in enumerate(messages):  # the older layout: all of it at once
                if not isinstance(message, dict) or not isinstance(message.get("id"), str):
                    raise refuse(where, f"messages[{i}]", "must be an object with an id")
                history.add(message, f"{where}: messages[{i}]")
    _apply_metadata(draft, history.metadata)
    if history.metadata.get("kind") == "subagent":
        draft.left_out = "a sub-agent's chat (its task and answer are in its parent session)"
        return draft
    if not draft.source_id:
        draft.source_id = lines.path.stem
    if history.rewound:
        draft.notes.append(f"{history.rewound} message(s) rewound in Gemini CLI left out")
    converter = _Converter(draft)
    boundaries = iter(history.boundaries)
    pending = next(boundaries, None)
    for archived, (where, record) in enumerate([*history.archive, *history.current.values()]):
        while pending is not None and archived == pending[0]:
            draft.compactions.append(Compaction(len(converter.out), pending[1], pending[2]))
            pending = next(boundaries, None)
        converter.record(record, where)
    while pending is not None:
        draft.compactions.append(Compaction(len(converter.out), pending[1], pending[2]))
        pending = next(boundaries, None)
    draft.messages = converter.out
    return draft


def read_checkpoint(lines: Lines, value: Any, project_root: str = "") -> Draft:
    """A ``/chat save`` checkpoint (its path is its id; its tag its title)."""
    path = lines.path
    tag = path.stem[len("checkpoint-"):] if path.stem.startswith("checkpoint-") else path.stem
    draft = Draft(FORMAT, CHECKPOINT_LABEL, path, f"checkpoint:{path.resolve()}",
                  project_root=project_root, title=tag, title_source="user")
    history = value.get("history") if isinstance(value, dict) else value
    if not isinstance(history, list):
        raise refuse(str(path), "history", "must be a list")
    converter = _Converter(draft)
    for i, content in enumerate(history):
        where = f"{path}: history[{i}]"
        parts = _parts(content.get("parts"), where, "parts")
        if content["role"] == "user":
            converter.user(parts, where, "parts")
        else:
            converter.model(parts, [], where)
    draft.messages = converter.out
    return draft
