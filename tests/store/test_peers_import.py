"""Importing other agents' sessions (actors/store/peers/): the fixtures in
tests/support/fixtures/peers/ (written from each peer's writer, versions in their README)
imported into a real store, on SQLite and PostgreSQL, and checked as the harness will use them:
a sendable context (every call paired, an interrupted call answered "interrupted", never
replayed), compaction boundaries, sub-agents left out, unknown tools kept as history, where the
session came from; and hostile files refused in one line naming the file and the line or
field."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from actors.core.messages import INTERRUPTED_NOTICE, SHOWN
from actors.runtime.context import WorkingContext
from actors.store import Store
from actors.store._hostile import call_id_problems
from actors.store.peers import import_sessions
from actors.store.peers._detect import detect
from actors.store.peers._draft import derived_id
from tests.support.stores import Stores

FIXTURES = Path(__file__).parents[1] / "support" / "fixtures" / "peers"
CLAUDE = FIXTURES / "claude-code" / "-home-dev-calc" / "5d1c2a3e-7b4f-4c1d-9e2a-1f0b6c8d4e21.jsonl"
CODEX = (FIXTURES / "codex" / "sessions" / "2026" / "08" / "02"
         / "rollout-2026-08-02T09-00-00-0198f3a2-6c1e-7d40-9b8a-2e5f4c3d1a07.jsonl")
GEMINI_DIR = FIXTURES / "gemini" / "tmp" / "calc"
GEMINI = GEMINI_DIR / "chats" / "session-2026-08-03T08-00-3f2a1b4c.jsonl"
GEMINI_OLD = GEMINI_DIR / "chats" / "session-2026-01-10T12-00-e1d2c3b4.json"
CHECKPOINT = GEMINI_DIR / "checkpoint-release-notes.json"


@pytest.fixture
def store(stores: Stores, memory_dir: Path) -> Store:
    return stores.open(memory_dir)


def imported(store: Store, path: Path) -> dict[str, Any]:
    walked = import_sessions(store, path)
    [result] = walked.results
    assert result.error is None and result.session_id, result
    return store.load_session(result.session_id)


def texts(messages: list[dict[str, Any]]) -> str:
    return "\n".join(json.dumps(m, ensure_ascii=False) for m in messages)


def calls_of(messages: list[dict[str, Any]]) -> dict[str, str]:
    return {c["id"]: c["function"]["name"] for m in messages for c in m.get("tool_calls") or []}


def result_of(messages: list[dict[str, Any]], call_id: str) -> str:
    [found] = [m["content"] for m in messages
               if m.get("role") == "tool" and m.get("tool_call_id") == call_id]
    return str(found)


def check_resumable(record: dict[str, Any]) -> None:
    """What the harness needs to resume: a system prompt first, every call paired."""
    for part in ("messages", "transcript"):
        assert record[part][0]["role"] == "system"
        assert call_id_problems(record[part]) == [], part
    assert "never run again" in record["messages"][0]["content"]


def test_claude_code_transcript(store: Store) -> None:
    record = imported(store, CLAUDE)
    check_resumable(record)
    context, transcript = record["messages"], record["transcript"]
    assert record["id"] == derived_id("claude-code", "5d1c2a3e-7b4f-4c1d-9e2a-1f0b6c8d4e21")
    assert record["title"] == "Divide function" and record["title_source"] == "user"
    assert record["project_root"] == "/home/dev/calc"
    assert record["created_at"].startswith("2026-08-01T10:00:02")
    # the compaction: the transcript keeps the conversation before it, the context starts
    # at the summary (data, as the harness's own)
    [compaction] = record["compactions"]
    assert compaction["before_tokens"] == 15234
    assert "divide(a, b) was added" in compaction["summary"]
    assert context[1]["content"].startswith("<session_context_data>")
    assert "I'll read calc.py first." in texts(transcript)
    assert "I'll read calc.py first." not in texts(context)
    # one answer written block by block is one message again, with its text and its call
    [joined] = [m for m in transcript if m.get("content") == "I'll read calc.py first."]
    assert [c["id"] for c in joined["tool_calls"]] == ["toolu_01"]
    # unknown tools kept as history; results wrapped as data
    assert calls_of(transcript) == {"toolu_01": "Read", "toolu_02": "Edit", "toolu_03": "Task",
                                    "toolu_05": "Bash"}
    assert result_of(transcript, "toolu_02").startswith('<tool_result name="Edit">')
    # the call the session was killed in: answered "interrupted", never run again
    assert result_of(context, "toolu_05") == INTERRUPTED_NOTICE
    # left out: the sub-agent's lines, thinking, the rewound branch, the CLI's caveats
    for gone in ("Tests added.\"", "read the file first", "an answer that was rewound",
                 "local-command-caveat", "EmwKAhgBEgy3va3pzix"):
        assert gone not in texts(transcript), gone
    assert "[image (image/png) not imported]" in texts(context)
    origin = record["state"]["origin"]
    assert origin["format"] == "claude-code" and origin["version"] == "2.1.240"
    assert origin["session_id"] == "5d1c2a3e-7b4f-4c1d-9e2a-1f0b6c8d4e21"
    assert origin["model"] == "claude-sonnet-4-5-20250929"
    assert origin["usage"]["input"] == 15000 and origin["usage"]["calls"] == 5
    assert "thinking blocks dropped: 2" in origin["notes"]
    assert "sub-agent lines left out: 2" in origin["notes"]


def test_codex_rollout(store: Store) -> None:
    record = imported(store, CODEX)
    check_resumable(record)
    context, transcript = record["messages"], record["transcript"]
    assert record["title"] == "Fix the divide test" and record["project_root"] == "/home/dev/calc"
    # Codex's own instructions and context blocks are not the conversation
    assert "permissions instructions" not in texts(transcript)
    assert "<environment_context>" not in texts(transcript)
    assert calls_of(transcript) == {"call_Kx1": "shell", "call_Kx2": "apply_patch",
                                    "call_Kx3": "shell"}
    # a free-form tool's input kept as a JSON object's text (what chat templates parse)
    patch = json.loads(next(c["function"]["arguments"] for m in transcript
                            for c in m.get("tool_calls") or [] if c["id"] == "call_Kx2"))
    assert patch["input"].startswith("*** Begin Patch")
    assert "1 failed, 1 passed" in result_of(transcript, "call_Kx1")
    assert result_of(context, "call_Kx3") == INTERRUPTED_NOTICE
    # a result without its call is kept, as text nobody typed
    [orphan] = [m for m in context if "call_gone" in str(m.get("content"))]
    assert orphan["role"] == "user" and orphan[SHOWN] == ""
    assert "output of a call this history does not hold" in orphan["content"]
    [compaction] = record["compactions"]
    assert "raises ZeroDivisionError" in compaction["summary"]
    assert "The divide test fails; fix it" in texts(transcript)
    assert "The divide test fails; fix it" not in texts(context)
    origin = record["state"]["origin"]
    assert origin["model"] == "gpt-5.1-codex" and origin["version"] == "0.128.0"
    assert origin["usage"] == {"input": 21480, "output": 612, "cached": 15360}
    assert "reasoning items dropped: 2" in origin["notes"]


def test_gemini_cli_chat(store: Store) -> None:
    record = imported(store, GEMINI)
    check_resumable(record)
    context, transcript = record["messages"], record["transcript"]
    assert record["project_root"] == "/home/dev/calc"  # from Gemini CLI's .project_root
    assert record["title"] == "Add a divide function to calc.py"
    # a record written again under its id replaced the first: two calls, answered once each
    assert calls_of(transcript) == {
        "list_directory-1754208001000-a1": "list_directory",
        "read_file-1754208001001-b2": "read_file",
        "google_web_search-1754208063000-c3": "google_web_search",
        "write_file-1754208245000-d4": "write_file",
    }
    assert "def add(a, b)" in result_of(transcript, "read_file-1754208001001-b2")
    assert "Error: Quota exceeded" in result_of(context, "google_web_search-1754208063000-c3")
    # still executing when Gemini CLI stopped: interrupted, even under a name the harness has
    assert result_of(context, "write_file-1754208245000-d4") == INTERRUPTED_NOTICE
    # the rewound turn and the UI's info line are not the conversation
    assert "oops, wrong window" not in texts(transcript)
    assert "fallback model" not in texts(transcript)
    # the compression: older turns stay in the transcript, the snapshot starts the context
    [compaction] = record["compactions"]
    assert "<state_snapshot>" in compaction["summary"]
    assert "List the files and read calc.py" in texts(transcript)
    assert "List the files and read calc.py" not in texts(context)
    assert "Got it. Thanks" not in texts(context)
    assert "message(s) rewound in Gemini CLI left out" in " ".join(
        record["state"]["origin"]["notes"])


def test_gemini_cli_older_recording_and_saved_chat(store: Store) -> None:
    old = imported(store, GEMINI_OLD)
    check_resumable(old)
    assert old["state"]["origin"]["session_id"] == "e1d2c3b4-a596-4788-9a0b-1c2d3e4f5a6b"
    assert "It adds two numbers." in texts(old["messages"])
    saved = imported(store, CHECKPOINT)
    check_resumable(saved)
    assert saved["title"] == "release-notes"
    assert "assert add(1, 2) == 3" in result_of(saved["messages"],
                                                "read_file-1754300000000-f6")
    assert "**Planning**" not in texts(saved["messages"])  # a thought part


def test_directories_are_walked_and_a_second_import_finds_them_present(store: Store) -> None:
    first = import_sessions(store, FIXTURES)
    assert [r.error for r in first.results if r.error] == []
    imported_ids = sorted(str(r.session_id) for r in first.results if r.session_id)
    assert len(imported_ids) == 5  # three peers' sessions, an older chat, a saved chat
    left_out = sorted(Path(r.source).name for r in first.results if r.left_out)
    assert left_out == ["7c6b5a49-3e2d-4c1b-8a09-f8e7d6c5b4a3.jsonl", "agent-b71e04.jsonl",
                        "rollout-2026-08-02T09-03-00-0198f3a2-8d2f-7e51-ac9b-3f6a5d4e2b18.jsonl"]
    assert first.passed_over == 1  # Gemini CLI's logs.json
    again = import_sessions(store, FIXTURES)
    assert sorted(str(r.session_id) for r in again.results if r.skipped) == imported_ids
    assert len(store.list_sessions(include_archived=True)) == 5


def test_formats_are_told_by_content_not_by_name(store: Store, tmp_path: Path) -> None:
    for source in (CLAUDE, CODEX, GEMINI):
        renamed = tmp_path / f"{source.parent.name}.json"
        shutil.copyfile(source, renamed)
        [result] = import_sessions(store, renamed).results
        assert result.error is None and result.label != "session record", result
    assert detect(CLAUDE.read_text()) == "claude-code"
    assert detect(CODEX.read_text()) == "codex"
    assert detect(GEMINI.read_text()) == "gemini"
    assert detect(CHECKPOINT.read_text()) == "gemini-checkpoint"


def rollout(*lines: dict[str, Any]) -> str:
    return "".join(json.dumps(line) + "\n" for line in lines)


def test_codex_fork_and_older_rollouts(store: Store, tmp_path: Path) -> None:
    meta = {"timestamp": "2026-08-02T10:00:00Z", "type": "session_meta"}
    fork = tmp_path / "fork.jsonl"
    fork.write_text(rollout(
        {**meta, "payload": {"id": "child-1", "cwd": "/p", "cli_version": "0.128.0",
                             "forked_from_id": "0198f3a2-6c1e-7d40-9b8a-2e5f4c3d1a07"}},
        {**meta, "payload": {"id": "0198f3a2-6c1e-7d40-9b8a-2e5f4c3d1a07", "cwd": "/p"}},
        {"timestamp": "2026-08-02T10:00:01Z", "type": "response_item",
         "payload": {"type": "message", "role": "user",
                     "content": [{"type": "input_text", "text": "hello"}]}}))
    record = imported(store, fork)
    assert record["parent_id"] == derived_id("codex", "0198f3a2-6c1e-7d40-9b8a-2e5f4c3d1a07")
    assert record["state"]["origin"]["session_id"] == "child-1"
    older = tmp_path / "rollout-2025-06-01T10-00-00-old.jsonl"
    older.write_text(rollout(
        {"id": "old-1", "timestamp": "2025-06-01T10:00:00Z", "instructions": None},
        {"record_type": "state"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"type": "function_call", "name": "shell", "arguments": "{\"command\":[\"ls\"]}",
         "call_id": "c1"},
        {"type": "function_call_output", "call_id": "c1",
         "output": {"content": "a.txt", "success": True}}))
    record = imported(store, older)
    check_resumable(record)
    assert "a.txt" in result_of(record["messages"], "c1")


def test_the_origin_survives_every_checkpoint_of_a_resumed_session() -> None:
    origin = {"format": "codex", "path": "/x.jsonl", "session_id": "s"}
    context = WorkingContext.restored([], {"origin": origin, "calls": 2}, overhead=0)
    assert context.state()["origin"] == origin
    assert "origin" not in WorkingContext.restored([], {}, overhead=0).state()


# -- hostile files -------------------------------------------------------------------------

GOOD = json.dumps({"type": "user", "uuid": "u1", "parentUuid": None, "sessionId": "hostile",
                   "timestamp": "2026-08-01T10:00:00Z", "cwd": "/p",
                   "message": {"role": "user", "content": "hello"}})


def claude_line(**changes: Any) -> str:
    entry = json.loads(GOOD)
    entry.update({"uuid": "u2", "parentUuid": "u1", **changes})
    return json.dumps(entry)


HOSTILE = {
    "garbage": ("this is not JSON", "line 2: not valid JSON"),
    "huge-number": (claude_line(timestamp=None).replace("null", "1" + "0" * 500),
                    "line 2: timestamp is an integer of more than 100 digits"),
    "infinity": (claude_line(cost=1).replace('"cost": 1', '"cost": 1e400'),
                 "line 2: cost is inf"),
    "deep": (claude_line(message=None).replace("null", "[" * 5000 + "]" * 5000),
             "line 2: message"),
    "surrogate": (claude_line(message={"role": "user", "content": "x"}).replace(
        '"x"', '"\\ud800"'), "line 2: message.content holds a lone surrogate"),
    "content-type": (claude_line(message={"role": "user", "content": 5}),
                     "line 2: message.content must be text or a list"),
    "block-type": (claude_line(message={"role": "user", "content": [7]}),
                   "line 2: message.content[0] must be an object"),
    "uuid-type": (claude_line(uuid=12), "line 2: uuid must be text"),
    "not-an-object": ("[1, 2]", "line 2: the entry must be an object"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_line_refuses_its_file_naming_the_line_and_field(
    name: str, tmp_path: Path, store: Store
) -> None:
    bad, expected = HOSTILE[name]
    path = tmp_path / f"{name}.jsonl"
    path.write_text(f"{GOOD}\n{bad}\n{claude_line(uuid='u3')}\n")
    [result] = import_sessions(store, path).results
    assert result.error is not None and "\n" not in result.error
    assert result.error.startswith(f"{path}: line 2: ") and expected in result.error, result
    assert store.list_sessions(include_archived=True) == []


def test_an_incomplete_last_line_is_left_out_with_a_note(store: Store, tmp_path: Path) -> None:
    path = tmp_path / "killed.jsonl"
    path.write_text(f"{GOOD}\n{claude_line()[:40]}")
    [result] = import_sessions(store, path).results
    assert result.error is None and result.session_id
    assert any("line 2: an incomplete last line left out" in n for n in result.notes)
    assert "hello" in texts(store.load_session(result.session_id)["messages"])


def test_a_directory_import_goes_on_past_hostile_files(store: Store, tmp_path: Path) -> None:
    for name, (bad, _) in HOSTILE.items():
        (tmp_path / f"{name}.jsonl").write_text(f"{GOOD}\n{bad}\n{claude_line(uuid='u3')}\n")
    shutil.copyfile(CODEX, tmp_path / "zz-good.jsonl")
    results = import_sessions(store, tmp_path).results
    assert len([r for r in results if r.error]) == len(HOSTILE)
    assert [Path(r.source).name for r in results if r.session_id] == ["zz-good.jsonl"]


def test_a_claude_code_session_is_named_by_its_file(store: Store, tmp_path: Path) -> None:
    """Older Claude Code versions began a resumed session's file with the lines of the
    session it resumed, their sessionId unchanged: the file's name is the session's id."""
    old, new = "11111111-2222-4333-8444-555555555555", "66666666-7777-4888-9999-aaaaaaaaaaaa"
    path = tmp_path / f"{new}.jsonl"
    copied = json.loads(GOOD) | {"sessionId": old}
    path.write_text(json.dumps(copied) + "\n" + claude_line(sessionId=new) + "\n")
    record = imported(store, path)
    assert record["id"] == derived_id("claude-code", new)
    assert record["state"]["origin"]["session_id"] == new
