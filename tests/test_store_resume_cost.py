"""What a resume costs, counted (not timed): each stored message is parsed once by
load_session + recover, and the first checkpoint after any load writes and parses what any
checkpoint does (actors/store/_store.py, actors/store/_extend.py)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.store import SqliteStore

SYSTEM = {"role": "system", "content": "sys"}


def turn(k: int) -> list[dict[str, Any]]:
    call = {"id": f"c{k}", "type": "function",
            "function": {"name": "read_file", "arguments": '{"path": "a"}'}}
    return [{"role": "user", "content": f"question {k}"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{k}", "content": f"result {k}"},
            {"role": "assistant", "content": f"answer {k}"}]


class Calls:
    """Counts calls of ``json.loads`` (how the store parses stored rows) or ``json.dumps``
    (how it encodes messages to compare or store them)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, name: str = "loads") -> None:
        self.count = 0
        real = getattr(json, name)

        def counting(*args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(json, name, counting)


def Parses(monkeypatch: pytest.MonkeyPatch) -> Calls:
    return Calls(monkeypatch, "loads")


@pytest.fixture
def saved(tmp_path: Path) -> Iterator[tuple[Path, str, list[dict[str, Any]]]]:
    memory = tmp_path / "memory"
    messages = [SYSTEM, *(m for k in range(50) for m in turn(k))]
    with SqliteStore(memory) as store:
        sid = store.create_session(messages=messages)
        store.catch_up_index()
    yield memory, sid, messages


def _written(store: SqliteStore, write: Callable[[], object]) -> int:
    with store.db.lock:
        before = store._conn.total_changes
    write()
    with store.db.lock:
        return int(store._conn.total_changes - before)


def _a_warm_checkpoint_writes(memory: Path, sid: str, messages: list[dict[str, Any]]) -> int:
    """Rows written by a checkpoint on a store instance that wrote the context itself."""
    with SqliteStore(memory) as store:
        context = store.recover(sid)
        store.checkpoint(sid, [*context, *turn(900)])
        return _written(store, lambda: store.checkpoint(sid, [*context, *turn(900), *turn(901)]))


@pytest.mark.parametrize("load", ["load_session", "load_context", "recover"])
def test_the_first_checkpoint_after_a_load_costs_what_any_checkpoint_costs(
    saved: tuple[Path, str, list[dict[str, Any]]], monkeypatch: pytest.MonkeyPatch, load: str
) -> None:
    memory, sid, messages = saved
    warm = _a_warm_checkpoint_writes(memory, sid, messages)
    with SqliteStore(memory) as store:  # a new instance: nothing cached
        parses = Parses(monkeypatch)
        if load == "load_session":
            context = store.load_session(sid)["messages"]
        elif load == "load_context":
            context = store.load_context(sid)
        else:
            context = store.recover(sid)
        # each stored message parsed once (and the state, for the record's metadata)
        assert parses.count == len(context) + (load == "load_session")
        parses.count = 0
        with store.lease(sid):  # as the supervisor holds it (taking it writes a pid record)
            encodes = Calls(monkeypatch, "dumps")
            written = _written(store, lambda: store.checkpoint(sid, [*context, *turn(902)]))
        assert parses.count == 0  # nothing read back
        assert encodes.count == 4  # the new messages only: nothing saved is compared
        assert written == warm  # four messages: transcript, context, index marks, session
        assert written == 4 * 3 + 1


def test_load_session_and_recover_parse_each_message_once(
    saved: tuple[Path, str, list[dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    memory, sid, messages = saved
    with SqliteStore(memory) as store:
        parses = Parses(monkeypatch)
        record = store.load_session(sid)
        with store.lease(sid):
            context = store.recover(sid)
        assert parses.count == len(record["transcript"]) + 1  # + the state
        assert context == messages and context[5] is record["messages"][5]


def test_an_append_reads_and_parses_nothing_whatever_the_length(
    saved: tuple[Path, str, list[dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    memory, sid, messages = saved
    with SqliteStore(memory) as store, store.lease(sid):  # nothing loaded, nothing cached
        parses = Parses(monkeypatch)
        written = _written(store, lambda: store.append(sid, turn(903), at=len(messages)))
        assert parses.count == 0 and written == 4 * 3 + 1
        assert store.load_context(sid)[-4:] == turn(903)
