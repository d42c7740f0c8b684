"""Hostile imports: every malformed record is a one-line skip naming the file and the field;
``--import DIR`` goes on past it; the same file among the older layout's records (imported on
every open) never stops another command, ``--doctor`` included."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from actors.core.errors import InvalidRecord
from actors.store import SessionStore, import_paths
from actors.store._records import read_record_file
from tests.support.clitools import harness

GOOD_ID = "goodsession1"


def record(session_id: str, **changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": session_id,
        "messages": [{"role": "user", "content": "hello"},
                     {"role": "assistant", "content": "hi"}],
    }
    base.update(changes)
    return base


def calls_of(value: Any) -> list[dict[str, Any]]:
    return [{"role": "user", "content": "go"},
            {"role": "assistant", "content": None, "tool_calls": value}]


DEEP = 100_000

# name -> (the file's text, the field the skip must name)
HOSTILE: dict[str, tuple[str, str]] = {
    "tokens-text": (json.dumps(record("hostile1", compactions=[
        {"summary": "s", "before_tokens": "abc", "after_tokens": 1}])),
        "compactions[0].before_tokens"),
    "tokens-huge": (json.dumps(record("hostile2", compactions=[
        {"summary": "s", "before_tokens": 1, "after_tokens": 0}])).replace(
        '"after_tokens": 0', '"after_tokens": 1e400'), "compactions[0].after_tokens"),
    "surrogate": ('{"id": "hostile3", "messages": [{"role": "user", "content": "a\\ud800b"}]}',
                  "messages[0].content"),
    "tool-calls-number": (json.dumps(record("hostile4", messages=calls_of(5))),
                          "messages[1].tool_calls"),
    "call-id-number": (json.dumps(record("hostile5", messages=calls_of([
        {"id": 7, "type": "function", "function": {"name": "x", "arguments": "{}"}}]))),
        "messages[1].tool_calls[0].id"),
    "deep": ('{"id": "hostile6", "messages": [{"role": "user", "content": "x", "extra": '
             + "[" * DEEP + "]" * DEEP + "}]}", "messages[0].extra"),
    "deep-state": (json.dumps(record("hostile7")).rstrip("}") + ', "state": {"a": '
                   + "[" * 150 + "]" * 150 + "}}", "state.a"),
    "digits": (json.dumps(record("hostile8")).rstrip("}") + ', "state": {"n": '
               + "9" * 5000 + "}}", "state.n"),
    "nan": (json.dumps(record("hostile9")).rstrip("}") + ', "state": {"n": NaN}}', "state.n"),
    "transcript-role": (json.dumps(record("hostile10", transcript=[{"content": "no role"}])),
                        "transcript[0].role"),
    "tokens-overflow": (json.dumps(record("hostile11", compactions=[
        {"summary": "s", "before_tokens": 10**23, "after_tokens": 1}])),
        "compactions[0].before_tokens"),
    "tokens-negative": (json.dumps(record("hostile12", compactions=[
        {"summary": "s", "before_tokens": 5, "after_tokens": -1}])),
        "compactions[0].after_tokens"),
    "fork-point-huge": (json.dumps(record("hostile13", fork_point=10**23)), "fork_point"),
    "fork-point-negative": (json.dumps(record("hostile14", fork_point=-3)), "fork_point"),
    "usage-negative": (json.dumps(record("hostile15", state={"total_tokens_in": -1})),
                       "state.total_tokens_in"),
    "usage-text": (json.dumps(record("hostile16", state={"calls": "many"})), "state.calls"),
    "cost-huge": (json.dumps(record("hostile17", state={"total_cost_usd": 1e300})),
                  "state.total_cost_usd"),
    "inherited-huge": (json.dumps(record("hostile18", state={
        "inherited_usage": {"calls": 10**30}})), "state.inherited_usage.calls"),
    "integer-beyond-64-bits": (json.dumps(record("hostile19", state={"x": 2**64})), "state.x"),
    "newer-format": (json.dumps({"format_version": 7, **record("hostile20")}),
                     "format_version"),
}


@pytest.fixture
def hostile_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "exports"
    directory.mkdir()
    for name, (text, _) in HOSTILE.items():
        (directory / f"{name}.json").write_text(text, encoding="utf-8")
    (directory / "zz-good.json").write_text(json.dumps(record(GOOD_ID)))
    return directory


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_each_hostile_record_is_refused_naming_the_file_and_field(
    hostile_dir: Path, name: str
) -> None:
    path = hostile_dir / f"{name}.json"
    with pytest.raises(InvalidRecord) as refused:
        read_record_file(path)
    line = str(refused.value)
    assert line.startswith(f"{path}: ") and "\n" not in line
    assert HOSTILE[name][1] in line


@pytest.mark.slow
def test_import_of_a_directory_goes_on_past_every_bad_file(
    hostile_dir: Path, memory_dir: Path
) -> None:
    result = harness("--import", str(hostile_dir), memory_dir=memory_dir)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    skipped = result.stderr.strip().splitlines()
    assert len(skipped) == len(HOSTILE)
    for name, (_, field) in HOSTILE.items():
        [line] = [s for s in skipped if f"{name}.json:" in s]
        assert line.startswith("harness: skipped ") and field in line
    assert f"Imported {GOOD_ID}" in result.stdout
    store = SessionStore(memory_dir)
    assert [s["id"] for s in store.list_sessions()] == [GOOD_ID]


@pytest.mark.slow
def test_hostile_records_in_the_older_layout_never_stop_a_command(
    hostile_dir: Path, memory_dir: Path, tmp_path: Path
) -> None:
    sessions = memory_dir / "sessions"
    sessions.mkdir(parents=True)
    for file in hostile_dir.iterdir():
        (sessions / file.name).write_bytes(file.read_bytes())
    listed = harness("--list-sessions", "--all", memory_dir=memory_dir)  # no project recorded
    assert listed.returncode == 0 and "Traceback" not in listed.stderr
    assert GOOD_ID in listed.stdout
    warnings = listed.stderr.strip().splitlines()
    assert len(warnings) == len(HOSTILE)  # one line each ...
    assert all(HOSTILE[name][1] in "".join(w for w in warnings if f"/{name}.json:" in w)
               for name in HOSTILE)
    again = harness("--list-sessions", "--all", memory_dir=memory_dir)
    assert again.returncode == 0 and again.stderr == ""  # ... once, until the file changes
    doctor = harness("--doctor", memory_dir=memory_dir)
    assert doctor.returncode == 0 and "Traceback" not in doctor.stderr
    assert "No problems found" in doctor.stdout
    assert all(f"sessions/{name}.json: older record not imported" in doctor.stdout
               for name in HOSTILE)
    assert harness("--info", GOOD_ID, memory_dir=memory_dir).returncode == 0


def test_the_store_api_refuses_a_hostile_record_without_writing(memory_dir: Path) -> None:
    store = SessionStore(memory_dir)
    with pytest.raises(InvalidRecord, match=r"messages\[1\]\.tool_calls must be a list"):
        store.import_record(record("apirecord1", messages=calls_of(5)))
    with pytest.raises(InvalidRecord, match="lone surrogate"):
        store.import_record(record("apirecord2", title="bad\udc80"))
    assert store.list_sessions() == []
    assert [r.error is None for r in import_paths(store, *[])] == []
