"""The session record as portable JSON: export shape, defaults for older records, markdown.

The exported record has the fields of the design notes plus ``format_version``. Records from
the notes' older JSON layout lack some fields; :func:`normalise_record` fills them with the
notes' defaults (``transcript`` = a copy of ``messages``, empty title, not archived, empty
state, no compactions) and checks what must be there.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from actors.core.errors import InvalidRecord
from actors.core.ids import check_session_id
from actors.core.messages import Message, text_of
from actors.core.previews import result_label, typed_with_labels
from actors.store._hostile import check_compactions, check_messages, check_values, decode_record

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


@dataclass
class ImportResult:
    """What happened to one file given to import: imported, skipped (id present) or error."""

    source: str
    session_id: str | None = None
    error: str | None = None
    skipped: bool = False


@dataclass
class SessionInfo:
    """Metadata of one session without its messages (cheap: one row and a count)."""

    id: str
    title: str
    summary: str
    status: str
    archived: bool
    created_at: str
    updated_at: str
    project_root: str
    parent_id: str | None
    state: dict[str, Any]
    context_messages: int
    transcript_messages: int
    compactions: list[dict[str, Any]] = field(default_factory=list)
    fork_point: int | None = None  # the parent's message number the fork was cut after
    title_source: str = ""  # "", "provisional", "model" or "user" (actors.core.titles)
    preview: str = ""  # the latest thing the user typed, on one line
    user_messages: int = 0  # messages the user typed


@dataclass(frozen=True)
class Rewound:
    """What a rewind did: the context now, the fork keeping what came after, and where."""

    messages: list[Any]
    fork_id: str
    before: int  # the user message the context now ends before


def timestamp() -> str:
    """Now, as ISO 8601 UTC with microseconds (so listings order stably)."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


def normalise_record(raw: Any, source: str) -> dict[str, Any]:
    """Check an imported record and fill missing fields; raise :class:`InvalidRecord` with
    one line naming ``source`` and the field (see :mod:`actors.store._hostile`)."""
    if not isinstance(raw, dict):
        raise InvalidRecord(f"{source}: not a JSON object")
    try:
        check_session_id(raw.get("id"))
    except ValueError:
        raise InvalidRecord(f"{source}: missing or invalid 'id'") from None
    check_values(raw, source)
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
    if not isinstance(record["state"], dict):
        raise InvalidRecord(f"{source}: state must be an object")
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
    return {key: record[key] for key in RECORD_FIELDS}


def read_record_file(path: Path) -> dict[str, Any]:
    """Parse one exported or legacy record file; raise :class:`InvalidRecord` naming it (and
    the field at fault)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidRecord(f"{path}: {exc}") from None
    return normalise_record(decode_record(text, str(path)), str(path))


def to_markdown(record: dict[str, Any]) -> str:
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
