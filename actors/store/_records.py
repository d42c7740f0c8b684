"""The session record as portable JSON: export shape, defaults for older records, markdown.

The exported record has the fields of the design notes plus ``format_version``. Records from
the notes' older JSON layout lack some fields; :func:`normalise_record` fills them with the
notes' defaults (``transcript`` = a copy of ``messages``, empty title, not archived, empty
state, no compactions) and checks what must be there.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypedDict, cast

from actors.core.errors import InvalidRecord
from actors.core.ids import check_session_id
from actors.core.messages import Message, text_of
from actors.core.previews import result_label, typed_with_labels
from actors.store._hostile import (
    check_compactions,
    check_messages,
    check_numbers,
    check_state,
    check_values,
    decode_record,
)
from actors.store._results import Compaction

FORMAT_VERSION = 1
STATUSES = ("active", "saved", "aborted")
RECORD_FIELDS = (
    "id",
    "created_at",
    "updated_at",
    "title",
    "summary",
    "archived",
    "status",
    "project_root",
    "parent_id",
    "fork_point",
    "title_source",
    "state",
    "messages",
    "transcript",
    "compactions",
)


class SessionRecord(TypedDict):
    """A whole session as portable JSON (``load_session``; ``--export`` adds
    ``format_version``): the metadata, the working context (``messages``, as it can be sent
    now), the transcript and the compactions."""

    id: str
    created_at: str
    updated_at: str
    title: str
    summary: str
    archived: bool
    status: str
    project_root: str
    parent_id: str | None
    fork_point: int | None
    title_source: str
    state: dict[str, Any]
    messages: list[Message]
    transcript: list[Message]
    compactions: list[Compaction]


class ExportedRecord(SessionRecord):
    """A record as ``--export`` writes it: :class:`SessionRecord` and its format."""

    format_version: int


def timestamp() -> str:
    """Now, as ISO 8601 UTC with microseconds (so listings order stably)."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


def normalise_record(raw: Any, source: str) -> SessionRecord:
    """Check an imported record and fill missing fields; raise :class:`InvalidRecord` with
    one line naming ``source`` and the field (see :mod:`actors.store._hostile`)."""
    if not isinstance(raw, dict):
        raise InvalidRecord(f"{source}: not a JSON object")
    try:
        check_session_id(raw.get("id"))
    except ValueError:
        raise InvalidRecord(f"{source}: missing or invalid 'id'") from None
    check_values(raw, source)
    check_numbers(raw, source, FORMAT_VERSION)
    check_messages(raw.get("messages"), "messages", source)
    record = copy.deepcopy(raw)
    now = timestamp()
    record.setdefault("created_at", now)
    record.setdefault("updated_at", record["created_at"])
    record.setdefault("transcript", copy.deepcopy(raw["messages"]))
    record.setdefault("title", "")
    record.setdefault("summary", "")
    record.setdefault("archived", False)
    record.setdefault("status", "saved")
    record.setdefault("project_root", "")
    record.setdefault("parent_id", None)
    record.setdefault("fork_point", None)
    record.setdefault("title_source", "user" if record.get("title") else "")
    record.setdefault("state", {})
    record.setdefault("compactions", [])
    check_messages(record["transcript"], "transcript", source)
    check_state(record["state"], source)
    if not isinstance(record["compactions"], list):
        raise InvalidRecord(f"{source}: compactions must be a list")
    check_compactions(record["compactions"], source)
    if record["status"] not in STATUSES:
        record["status"] = "saved"
    if record["title_source"] not in ("", "provisional", "model", "user"):
        record["title_source"] = "user" if record["title"] else ""
    if not isinstance(record["fork_point"], int) or isinstance(record["fork_point"], bool) \
            or record["fork_point"] < 1:
        record["fork_point"] = None
    if record["parent_id"] is not None:
        try:
            check_session_id(record["parent_id"])
        except ValueError:
            record["parent_id"] = None
    for key in ("title", "summary", "project_root", "created_at", "updated_at"):
        if not isinstance(record[key], str):
            record[key] = str(record[key])
    record["archived"] = bool(record["archived"])
    return cast(SessionRecord, {key: record[key] for key in RECORD_FIELDS})


def read_record_file(path: Path) -> SessionRecord:
    """Parse one exported or legacy record file; raise :class:`InvalidRecord` naming it (and
    the field at fault)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidRecord(f"{path}: {exc}") from None
    return normalise_record(decode_record(text, str(path)), str(path))


def to_markdown(record: SessionRecord) -> str:
    """A readable transcript of a record for humans (``--export ID --format markdown``)."""
    lines = [f"# {record['title'] or 'Session ' + record['id']}", ""]
    lines.append(f"- id: `{record['id']}`")
    lines.append(f"- created: {record['created_at']}  updated: {record['updated_at']}")
    lines.append(f"- status: {record['status']}  archived: {record['archived']}")
    if record.get("project_root"):
        lines.append(f"- project: `{record['project_root']}`")
    if record.get("parent_id"):
        at = f" at message {record['fork_point']}" if record.get("fork_point") else ""
        lines.append(f"- forked from: `{record['parent_id']}`{at}")
    if record.get("summary"):
        lines += ["", "## Summary", "", record["summary"]]
    lines += ["", "## Transcript", ""]
    for number, message in enumerate(record["transcript"], 1):
        lines.append(_markdown_message(number, message))
    for i, compaction in enumerate(record.get("compactions", []), 1):
        lines += [
            "",
            f"## Compaction {i} ({compaction.get('at', '')}: "
            f"{compaction.get('before_tokens')} -> {compaction.get('after_tokens')} tokens)",
            "",
            str(compaction.get("summary", "")),
        ]
    return "\n".join(lines) + "\n"


def _markdown_message(number: int, message: Message) -> str:
    """One transcript message, headed by its number (what ``--fork ID --at N`` takes), as a
    person reads it: the system prompt and tool results as short labels, what the user
    typed without the files attached to it (named), no data tags (the JSON export has
    everything)."""
    role = message.get("role", "unknown")
    if role == "system":
        return f"**[{number}] system prompt** (the harness's instructions; in the JSON export)\n"
    if role == "tool":
        label = result_label(str(message.get("content") or ""))
        return f"**[{number}] tool result** (`{message.get('tool_call_id', '')}`): {label}\n"
    typed = typed_with_labels(message)
    text = typed if typed is not None else text_of(message)
    return f"**[{number}] {role}**: {text or '[no content]'}\n"
