"""What a resume costs, counted (not timed): a resume (recover, load_context) parses no
message, load_session parses each once, and the first checkpoint after any load writes and
parses what any checkpoint does (actors/store/_store.py, actors/store/_extend.py,
actors/core/stored.py)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.core.budget import estimate_messages
from actors.core.errors import CorruptSession
from actors.core.messages import INTERRUPTED_NOTICE, pairing_problems
from actors.core.stored import StoredMessages
from actors.model import _body
from actors.store import SqliteStore, _extend, _rows
from actors.testing.scripted_server import Reply, ScriptedServer
from tests.support.runtime import running, settings_for
from tests.support.stores import Stores

SYSTEM = {"role": "system", "content": "sys"}


def turn(k: int) -> list[dict[str, Any]]:
    call = {"id": f"c{k}", "type": "function",
            "function": {"name": "read_file", "arguments": '{"path": "a"}'}}
    return [{"role": "user", "content": f"question {k}"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{k}", "content": f"result {k}"},
            {"role": "assistant", "content": f"answer {k}"}]


class Calls:
    """Counts calls of ``json.loads`` (how the store parses stored rows) or of another
    function ``name`` of ``module``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, name: str = "loads",
                 module: Any = json) -> None:
        self.count = 0
        real = getattr(module, name)

        def counting(*args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, counting)


def StoreEncodes(monkeypatch: pytest.MonkeyPatch) -> Calls:
    """Counts the messages the store encodes, to compare or to store them."""
    return Calls(monkeypatch, "encode", _extend)


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
@pytest.mark.parametrize("how", ["append", "checkpoint"])
def test_the_first_checkpoint_after_a_load_costs_what_any_checkpoint_costs(
    saved: tuple[Path, str, list[dict[str, Any]]], monkeypatch: pytest.MonkeyPatch, load: str,
    how: str,
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
        # the whole record parses each stored message once (and the state, for its
        # metadata); a resume parses nothing
        assert parses.count == (len(context) + 1 if load == "load_session" else 0)
        whole = [*context, *turn(902)]  # the caller reads every message (parsed, if lazy)
        parses.count = 0
        with store.lease(sid):  # as the supervisor holds it (taking it writes a pid record)
            encodes = StoreEncodes(monkeypatch)
            if how == "append":
                written = _written(store, lambda: store.append(sid, turn(902),
                                                               at=len(context)))
            else:
                written = _written(store, lambda: store.checkpoint(sid, whole))
        assert parses.count == 0  # nothing read back
        assert encodes.count == 4  # the new messages only: nothing saved is compared
        assert written == warm  # four messages: their transcript rows (the context's
        assert written == 4 + 1  # tail takes them in), and the session row
        assert store.load_context(sid) == whole


def test_a_resume_parses_nothing_and_reads_each_row_once(
    saved: tuple[Path, str, list[dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    memory, sid, messages = saved
    with SqliteStore(memory) as store, store.lease(sid):
        parses = Parses(monkeypatch)
        context = store.recover(sid)
        again = store.recover(sid)  # cached: nothing read
        assert parses.count == 0 and context.parsed() == 0
        assert context.estimate_tokens() == estimate_messages(messages)
        assert context[7] is again[7]  # one parse, shared by every copy
        assert parses.count == 1
        assert list(context) == messages and parses.count == len(messages)


def test_calls_left_open_are_answered_on_resume_without_parsing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = tmp_path / "memory"
    open_call = turn(7)[:2]
    with SqliteStore(memory) as store:
        sid = store.create_session(messages=[SYSTEM, *turn(1), *open_call])
    with SqliteStore(memory) as store, store.lease(sid):
        parses = Parses(monkeypatch)
        context = store.recover(sid)
        assert parses.count == 0
        assert context[-1]["tool_call_id"] == "c7" and len(context) == 8
        assert parses.count == 0  # the notice is the store's own dict
    with SqliteStore(memory) as store:
        assert list(store.load_context(sid)) == list(context)
        assert pairing_problems(store.load_context(sid)) == []


def test_rows_saved_without_their_facts_are_parsed_and_still_checked(
    tmp_path: Path
) -> None:
    """Rows written before the facts were kept (NULL) are read as the messages they hold."""
    memory = tmp_path / "memory"
    orphan = {"role": "tool", "tool_call_id": "nobody", "content": "stray"}
    with SqliteStore(memory) as store:
        sid = store.create_session(messages=[SYSTEM, *turn(1), orphan, *turn(2)[:2]])
        with store.db.lock:
            store._conn.execute("UPDATE transcript SET shape = NULL, tokens = NULL")
    with SqliteStore(memory) as store, store.lease(sid):
        context = store.recover(sid)
        assert orphan not in list(context)
        assert context[-1] == {"role": "tool", "tool_call_id": "c2",
                               "content": INTERRUPTED_NOTICE}
        assert pairing_problems(context) == []
    with SqliteStore(memory) as store:
        assert list(store.load_context(sid)) == list(context)
        assert store.load_context(sid).estimate_tokens() == estimate_messages(list(context))


def test_a_damaged_row_of_a_lazy_context_is_reported_when_read(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    with SqliteStore(memory) as store:
        sid = store.create_session(messages=[SYSTEM, *turn(1)])
        with store.db.lock:
            store._conn.execute("UPDATE transcript SET body = '{\"role\": \"us' WHERE seq = 2")
    with SqliteStore(memory) as store, store.lease(sid):
        context = store.recover(sid)  # the facts are whole: the resume itself succeeds
        assert context[1] == turn(1)[0]
        with pytest.raises(CorruptSession, match="context message 2 is not valid JSON"):
            context[2]
        with pytest.raises(CorruptSession):
            store.load_session(sid)  # the whole record: never half-loaded


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
        assert parses.count == 0 and written == 4 + 1  # transcript rows, the session's
        assert store.load_context(sid)[-4:] == turn(903)


# -- the first request after a resume (actors/model/_body.py) --------------------------------


class RowParses:
    """Counts the store's parses of context rows (each ``StoredMessages`` row read)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        real = _rows.json_loader

        def loader(session_id: str, damage_hint: str) -> Callable[[str, str], Any]:
            loads = real(session_id, damage_hint)

            def counting(body: str, what: str) -> Any:
                self.count += what.startswith("context message")  # not the state's
                return loads(body, what)

            return counting

        monkeypatch.setattr(_rows, "json_loader", loader)


class Encodes:
    """Counts the messages the model client encodes for its requests."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        real = _body._for_wire

        def counting(message: dict[str, Any], reasoning: bool = False) -> dict[str, Any]:
            self.count += 1
            return real(message, reasoning)

        monkeypatch.setattr(_body, "_for_wire", counting)


TYPED = {"role": "user", "content": "Read this:\n<file a.txt>naïve “quotes” \u2028</file>",
         "shown": "@a.txt"}  # what the user typed: kept in the store, never sent


@pytest.mark.anyio
async def test_the_first_request_after_a_resume_sends_the_stored_rows_unparsed(
    tmp_path: Path, stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    history = [SYSTEM, *(m for k in range(60) for m in turn(k)), TYPED,
               {"role": "assistant", "content": "Ünïcode ✓ 1.5e300 \\ \"quoted\" \x7f"},
               *(m for k in range(60, 100) for m in turn(k))]
    with ScriptedServer([Reply("Fine."), Reply("Again.")]) as server:
        settings = settings_for(tmp_path, server.base_url)
        sid = stores.open(settings.memory_dir).create_session(
            messages=history, project_root=str(settings.sandbox_dir))
        parses, encodes = RowParses(monkeypatch), Encodes(monkeypatch)
        resumed = stores.open(settings.memory_dir)  # a new instance: nothing cached
        async with running(settings, resumed, resume=sid) as (sup, _):
            assert parses.count == 0
            assert (await sup.run_turn("hi")).ok
            # the row holding what the user typed is read (and encoded without it), and the
            # new message encoded; every other message went as stored
            assert parses.count == 1 and encodes.count == 2
            parses.count = encodes.count = 0
            assert (await sup.run_turn("and again")).ok
            assert parses.count == 0 and encodes.count == 2  # the answer and the new message
        server.assert_done()
    sent = stores.open(settings.memory_dir).load_context(sid)
    for raw, request in zip(server.raw_requests, server.requests, strict=True):
        # byte for byte what encoding each parsed message gives
        messages = list(sent[:len(request["messages"])])
        expected = b"[" + b",".join(_body.dumps(_body._for_wire(m)) for m in messages) + b"]"
        head = _body.dumps({"model": request["model"]})[:-1]
        assert raw.startswith(head + b',"messages":' + expected + b',"stream":true')
    first = server.requests[0]["messages"]
    assert first[:len(history)] == [*history[:241], {"role": "user", "content": TYPED["content"]},
                                    *history[242:]]
    assert b"@a.txt" not in server.raw_requests[0]


def test_two_resumes_are_told_apart_by_their_rows_owner() -> None:
    """Row indexes of two stored contexts are alike; the encoder must not take one for
    the other (the same small ints)."""
    from actors.core.messages import encode, shape_of

    def read(messages: list[dict[str, Any]]) -> StoredMessages:
        return StoredMessages.read([encode(m) for m in messages],
                                   [shape_of(m) for m in messages],
                                   [estimate_messages([m]) for m in messages],
                                   lambda text, _: json.loads(text))

    one, two = [SYSTEM, *turn(1)], [SYSTEM, *turn(2)]
    encoded = _body.EncodedMessages()
    encoded.update(read(one))
    assert encoded.taken == 5 and encoded.encoded == 0
    other = read(two)
    assert not encoded.starts(other)
    encoded.update(other)
    assert json.loads(bytes(encoded.body({}, {})))["messages"] == two
    assert encoded.call_ids == {"c2"} and encoded.tokens == estimate_messages(two)
    again = other.copy()
    again.append({"role": "user", "content": "more"})
    assert encoded.starts(again)
    encoded.update(again)
    assert encoded.taken == 10 and encoded.encoded == 1
    assert json.loads(bytes(encoded.body({}, {})))["messages"] == [*two, again[-1]]


# -- a compaction after a resume (actors/core/compaction.py) ---------------------------------


def long_turn(k: int, length: int = 400) -> list[dict[str, Any]]:
    """A turn of about 120 estimated tokens (a result of ``length`` characters)."""
    first, *rest = turn(k)
    rest[1] = {**rest[1], "content": f"result {k} " + "x" * length}
    return [first, *rest]


@pytest.mark.anyio
async def test_a_compaction_after_a_resume_parses_what_it_sends_and_keeps(
    tmp_path: Path, stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first turn after resuming a context over the budget compacts it: the split reads
    the roles from the stored text, the fitting the saved estimates, and only the messages
    the summary request sends are parsed (and the system prompt, which the compacted
    context keeps, and the first message after it, which the split reads to see whether a
    compaction carried it). The summary request and the compacted context are what the same
    rules give on the parsed messages."""
    from actors.core.compaction import compacted, fit_for_summary, split_point
    from actors.runtime.compactor import SUMMARY_INPUT_SHARE

    history = [SYSTEM, *(m for k in range(200) for m in long_turn(k))]
    budget = 6000
    summaries: list[dict[str, Any]] = []

    def respond(body: dict[str, Any]) -> Reply:
        if str(body["messages"][0]["content"]).startswith("Summarize conversation data"):
            summaries.append(body)
            return Reply("Summary: earlier work.")
        return Reply("Fine.")

    with ScriptedServer(respond) as server:
        settings = settings_for(tmp_path, server.base_url, max_context_tokens=budget)
        sid = stores.open(settings.memory_dir).create_session(
            messages=history, project_root=str(settings.sandbox_dir))
        parses = RowParses(monkeypatch)
        async with running(settings, stores.open(settings.memory_dir), resume=sid) as (sup, _):
            assert parses.count == 0
            assert (await sup.run_turn("hi")).ok
        server.assert_done()
    assert len(summaries) == 1
    plain = [*history, {"role": "user", "content": "hi"}]
    split = split_point(plain)
    assert split is not None
    expected = fit_for_summary(split.older(plain), int(budget * SUMMARY_INPUT_SHARE))
    assert json.loads(summaries[0]["messages"][1]["content"]) == expected
    sent = len(expected) - 1  # after the note of what was left out
    assert 0 < sent < len(history) // 4
    assert parses.count == sent + 2
    context = stores.open(settings.memory_dir).load_context(sid)
    assert context[:-1] == compacted(plain, split, "Summary: earlier work.", [])
    assert context[-1] == {"role": "assistant", "content": "Fine."}


def test_a_compaction_saved_after_a_resume_reads_no_whole_copy(
    tmp_path: Path, stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Replacing a resumed context by a compacted one checks the prefix it was made from by
    its rows (nothing parsed) and looks up only the kept messages' transcript rows: what it
    allocates is a small part of the context (it read every row's text at once)."""
    import tracemalloc

    history = [SYSTEM, *(m for k in range(500) for m in long_turn(k, 4000))]
    store = stores.open(tmp_path / "memory")
    sid = store.create_session(messages=history)
    store.catch_up_index()  # (the search index reads every new message, once)
    store = stores.open(tmp_path / "memory")  # a new instance: the context read back lazily
    context = store.recover(sid)
    assert isinstance(context, StoredMessages)
    size = sum(len(context.text(i)) for i in range(len(context)))
    summary = {"role": "user", "content": "<session_context_data>\nSummary."}
    kept = [context[0], summary, *context[-4:]]
    parses = Parses(monkeypatch)
    tracemalloc.start()
    try:
        store.replace_context(sid, kept, compaction={"at": None, "before_tokens": 2,
                                                     "after_tokens": 1, "summary": "Summary."},
                              expect_prefix=context.view(0, len(context) - 4))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert parses.count == 0
    assert peak < size // 10, (peak, size)
    assert stores.open(tmp_path / "memory").load_context(sid) == kept
