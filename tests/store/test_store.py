"""The session store on both backends: records, delta checkpoints, the extend rule, search,
recovery, fork/archive/delete. Real SQLite files in temporary directories, and a real
PostgreSQL server (a fresh schema per test) when AGENT_HARNESS_TEST_PG is set."""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path
from typing import Any

import pytest

from actors.core.errors import ContextConflict, InvalidSessionId, SessionNotFound, UsageError
from actors.core.messages import INTERRUPTED_NOTICE, NOT_STARTED_NOTICE, pairing_problems
from actors.store import SessionStore, Store, export_session, import_paths
from tests.support.stores import Stores

SYSTEM = {"role": "system", "content": "You are a coding agent."}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str | None, *calls: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [
            {"id": c, "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
            for c in calls
        ]
    return message


def result(call_id: str, text: str = "ok") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


@pytest.fixture
def store(stores: Stores, memory_dir: Path) -> Store:
    return stores.open(memory_dir)


def test_database_is_private_wal_and_fully_synchronous(memory_dir: Path) -> None:
    store = SessionStore(memory_dir)
    assert stat.S_IMODE(store.memory_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(store.sessions_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(store.db_path.stat().st_mode) == 0o600
    assert store.db.connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store.db.connection.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    sid = store.create_session()
    with store.lease(sid):
        assert stat.S_IMODE(store.lock_path(sid).stat().st_mode) == 0o600
    store.close()


def test_postgres_commits_are_synchronous_and_memory_dir_private(
    pg_stores: Stores, memory_dir: Path
) -> None:
    from actors.store.postgres._schema import SCHEMA_VERSION as PG_SCHEMA_VERSION

    store = pg_stores.open(memory_dir)
    assert stat.S_IMODE(store.memory_dir.stat().st_mode) == 0o700
    assert pg_stores.rows(store, "SHOW synchronous_commit") == [("on",)]
    assert pg_stores.rows(store, "SELECT max(version) FROM harness_schema") == [
        (PG_SCHEMA_VERSION,)]


def test_new_ids_are_ten_random_alphanumerics(store: Store) -> None:
    ids = {store.create_session() for _ in range(20)}
    assert len(ids) == 20
    assert all(len(i) == 10 and i.isalnum() and i.isascii() for i in ids)


@pytest.mark.parametrize(
    "bad", ["../etc", "a/b", "", "x\x00y", "id with space", "é", "a" * 10_000, ".", "a\n"]
)
def test_hostile_ids_are_refused_before_any_path_or_query(
    store: Store, bad: str
) -> None:
    for call in (
        lambda: store.load_session(bad),
        lambda: store.checkpoint(bad, []),
        lambda: store.create_session(bad),
        lambda: store.delete(bad),
        lambda: store.lease(bad).__enter__(),
    ):
        with pytest.raises(InvalidSessionId):
            call()
    assert list(store.sessions_dir.iterdir()) == []


def test_record_has_every_field_of_the_notes(store: Store) -> None:
    sid = store.create_session(messages=[SYSTEM], project_root="/proj")
    record = store.load_session(sid)
    assert set(record) == {
        "id", "created_at", "updated_at", "title", "summary", "archived", "status",
        "project_root", "parent_id", "state", "messages", "transcript", "compactions",
        "fork_point", "title_source",  # lineage; where the title came from
    }
    assert record["messages"] == [SYSTEM] == record["transcript"]
    assert record["project_root"] == "/proj"
    assert record["archived"] is False and record["parent_id"] is None


def test_checkpoint_writes_messages_and_state_together(store: Store) -> None:
    sid = store.create_session(messages=[SYSTEM])
    messages = [SYSTEM, user("hello")]
    store.checkpoint(sid, messages, state={"scratchpad": "notes", "calls": 1})
    record = store.load_session(sid)
    assert record["messages"] == messages
    assert record["state"] == {"scratchpad": "notes", "calls": 1}


def test_failed_checkpoint_writes_nothing(store: Store, stores: Stores) -> None:
    sid = store.create_session(messages=[SYSTEM])
    with pytest.raises(TypeError):
        store.checkpoint(sid, [SYSTEM, user("lost")], state={"bad": object()})
    record = store.load_session(sid)
    assert record["messages"] == [SYSTEM] and record["state"] == {}
    # and the store is still usable, with the cache not ahead of the disk
    store.checkpoint(sid, [SYSTEM, user("kept")])
    assert stores.open(store.memory_dir).load_session(sid)["messages"][-1] == user("kept")


def _statements_per_checkpoint(store: Store, sid: str, messages: list[Any]) -> int:
    seen: list[str] = []
    store.db.connection.set_trace_callback(seen.append)
    try:
        messages += [user("one more"), assistant("and an answer")]
        store.checkpoint(sid, messages, state={"n": len(messages)})
    finally:
        store.db.connection.set_trace_callback(None)
    return len(seen)


def test_checkpoint_cost_does_not_grow_with_session_length(store: Store) -> None:
    short, long_ = store.create_session(), store.create_session()
    short_msgs = [SYSTEM, user("a")]
    long_msgs = [SYSTEM] + [user(f"message {i}") for i in range(2000)]
    store.checkpoint(short, short_msgs)
    store.checkpoint(long_, long_msgs)
    assert _statements_per_checkpoint(store, short, short_msgs) == _statements_per_checkpoint(
        store, long_, long_msgs
    )


def _statements_of(store: Store, write: Any) -> list[str]:
    seen: list[str] = []
    store.db.connection.set_trace_callback(seen.append)
    try:
        write()
    finally:
        store.db.connection.set_trace_callback(None)
    return seen


def test_an_append_costs_the_same_statements_whatever_it_appends(store: Store) -> None:
    sid = store.create_session(messages=[SYSTEM], title="named")  # no provisional title
    at = 1

    def append(messages: list[dict[str, Any]], planned: bool = False) -> list[str]:
        nonlocal at
        with store.lease(sid):
            statements = _statements_of(store, lambda: store.append(
                sid, messages, at=at, state={"n": at}, planned_calls=planned))
        at += len(messages)
        return statements

    one = append([assistant("one")])
    calls = append([assistant(None, "c1", "c2")], planned=True)  # + their records, planned
    many = append([result("c1"), result("c2"), user("next"), assistant("five")])
    reads = append([assistant(None, "r1"), result("r1")])  # a batch saved with its answer
    # the transcript rows, the write-ahead records: one statement each; the context takes
    # in the transcript's new rows as its tail, without a row of its own
    assert len(calls) == len(one) + 1  # + the one that records the two calls, planned
    assert len(many) == len(one) + 1  # + the one that deletes the two calls' records
    assert len(reads) == len(one)  # never recorded: nothing to delete
    assert sum("INSERT INTO transcript" in s for s in many) == 1
    assert not any(re.search(r"(INTO|FROM|UPDATE) context\b", s) for s in one + many)
    # the session row's counters are read, not its state (nor anything else it holds)
    selects = [s for s in many if s.startswith("SELECT") and "FROM sessions" in s]
    assert len(selects) == 1 and "state" not in selects[0]
    assert [m["content"] for m in store.load_context(sid)][-7:] == [
        None, "ok", "ok", "next", "five", None, "ok"]


def test_rows_near_the_end_of_the_rowid_range_are_read_back(memory_dir: Path) -> None:
    store = SessionStore(memory_dir)
    sid = store.create_session(messages=[SYSTEM])
    other = store.create_session(messages=[SYSTEM])
    with store.db.lock:  # a transcript numbered far up (an import, a hand-made file)
        store.db.connection.execute(
            "UPDATE transcript SET mid = ? WHERE session_rid = (SELECT rid FROM sessions"
            " WHERE id = ?)", (2**62 + 10, other))
    with store.lease(sid):  # new transcript rows the context's own rows point at
        store.replace_context(sid, [SYSTEM, user("a"), assistant("b")],
                              new_in_transcript=[user("a"), assistant("b")])
    with store.db.lock:
        mids = [mid for (mid,) in store.db.connection.execute(
            "SELECT c.mid FROM context c JOIN sessions s ON s.rid = c.session_rid"
            " WHERE s.id = ? ORDER BY c.pos", (sid,))]
    assert mids[1:] == [2**62 + 11, 2**62 + 12]
    fresh = SessionStore(memory_dir)
    assert fresh.load_context(sid) == [SYSTEM, user("a"), assistant("b")]
    assert fresh.load_session(sid)["transcript"] == [SYSTEM, user("a"), assistant("b")]
    fresh.close()
    store.close()


def test_stored_text_is_json_dumps_text() -> None:
    from actors.core.messages import encode
    from actors.store._rows import dump_state

    odd: dict[str, Any] = {
        "role": "tool", "content": 'é\n\t"\\ \u2028 \x00 🙂', "n": [1, -2.5, 1e300, None, True],
        "nested": {"z": {}, "a": [[], {"k": float("nan")}]}, 3: "int key",
    }
    assert encode(odd) == json.dumps(odd, ensure_ascii=False, separators=(",", ":"))
    state = {"b": 1, "a": {"d": [odd["content"]], "c": 2.0}}
    assert dump_state(state) == json.dumps(state, ensure_ascii=False, sort_keys=True)
    with pytest.raises(TypeError, match="not JSON serializable"):
        encode({"role": "user", "content": {1, 2}})
    with pytest.raises(TypeError):
        dump_state({"a": object()})
    cycle: dict[str, Any] = {"role": "user"}
    cycle["self"] = cycle
    with pytest.raises(ValueError, match="Circular"):
        encode(cycle)


def test_earlier_rows_are_never_rewritten(store: Store, stores: Stores) -> None:
    sid = store.create_session(messages=[SYSTEM])
    messages = [SYSTEM, user("first")]
    store.checkpoint(sid, messages)
    before = stores.rows(store, "SELECT mid, body FROM transcript ORDER BY mid")
    messages.append(assistant("second"))
    store.checkpoint(sid, messages)
    after = stores.rows(store, "SELECT mid, body FROM transcript ORDER BY mid")
    assert after[: len(before)] == before and len(after) == len(before) + 1


def test_checkpoint_must_extend_the_saved_context(store: Store) -> None:
    sid = store.create_session(messages=[SYSTEM, user("a"), assistant("b")])
    with pytest.raises(ContextConflict, match="only compaction"):
        store.checkpoint(sid, [SYSTEM, user("a")])
    with pytest.raises(ContextConflict, match="message 1"):
        store.checkpoint(sid, [SYSTEM, user("changed"), assistant("b"), user("c")])
    assert store.load_session(sid)["messages"] == [SYSTEM, user("a"), assistant("b")]


def test_extend_rule_compares_values_not_identity(store: Store, stores: Stores) -> None:
    sid = store.create_session(messages=[SYSTEM, user("a")])
    fresh = stores.open(store.memory_dir)  # no cache: compares against the disk
    fresh.checkpoint(sid, [dict(SYSTEM), user("a"), assistant("b")])
    # the first store notices the other instance's append and reloads
    store.checkpoint(sid, [SYSTEM, user("a"), assistant("b"), user("c")])
    assert len(fresh.load_session(sid)["messages"]) == 4


def test_sdk_message_objects_are_dumped(store: Store) -> None:
    class Dumpable:
        def model_dump(self, exclude_none: bool) -> dict[str, Any]:
            assert exclude_none
            return {"role": "assistant", "content": "from the SDK"}

    sid = store.create_session(messages=[SYSTEM])
    store.checkpoint(sid, [SYSTEM, Dumpable()])
    assert store.load_session(sid)["messages"][-1]["content"] == "from the SDK"
    with pytest.raises(TypeError, match="Cannot persist"):
        store.checkpoint(sid, [SYSTEM, Dumpable(), 42])


def test_unknown_session(store: Store) -> None:
    with pytest.raises(SessionNotFound, match="No saved session with id 'missing'"):
        store.load_session("missing")
    with pytest.raises(SessionNotFound):
        store.checkpoint("missing", [SYSTEM])


def test_list_is_most_recent_first_and_hides_archived(store: Store) -> None:
    a, b, c = (store.create_session() for _ in range(3))
    store.update(a, title="touched last")
    store.update(b, archived=True)
    listed = [s["id"] for s in store.list_sessions()]
    assert listed == [a, c]
    everything = store.list_sessions(include_archived=True)
    assert [s["id"] for s in everything] == [b, a, c]  # archiving counts as an update
    assert [s["archived"] for s in everything] == [True, False, False]
    store.update(b, archived=False)
    assert b in [s["id"] for s in store.list_sessions()]


def test_search_needs_every_term_case_insensitive_substrings(store: Store) -> None:
    cache = store.create_session(messages=[SYSTEM, user("The Cache key omits the locale")])
    other = store.create_session(messages=[SYSTEM, user("cache warmed at startup")])
    store.update(other, summary="Nothing about languages.")
    assert [r["id"] for r in store.search_sessions("cache LOCALE")] == [cache]
    assert {r["id"] for r in store.search_sessions("cache")} == {cache, other}
    assert [r["id"] for r in store.search_sessions("ocal")] == [cache]  # substring
    assert [r["id"] for r in store.search_sessions("languages")] == [other]  # summary
    assert store.search_sessions("cache nonexistentword") == []
    assert store.search_sessions("   ") == []
    hit = store.search_sessions("locale")[0]
    assert "locale" in hit["snippet"].lower()


def test_search_short_terms_tool_arguments_and_titles(store: Store) -> None:
    sid = store.create_session(messages=[SYSTEM, assistant(None, "call_1")])
    store.update(sid, title="Parser rewrite")
    assert [r["id"] for r in store.search_sessions("read_file")] == [sid]  # tool name
    assert [r["id"] for r in store.search_sessions("pa rewrite")] == [sid]  # 2-letter term
    assert [r["id"] for r in store.search_sessions("parser")] == [sid]


def test_search_excludes_archived_unless_asked(store: Store) -> None:
    sid = store.create_session(messages=[SYSTEM, user("archived needle")])
    store.update(sid, archived=True)
    assert store.search_sessions("needle") == []
    assert [r["id"] for r in store.search_sessions("needle", include_archived=True)] == [sid]


def test_search_ranks_better_matches_first(store: Store) -> None:
    weak = store.create_session(
        messages=[SYSTEM, user("a long message " + "filler words " * 200 + "kernel")]
    )
    strong = store.create_session(messages=[SYSTEM, user("kernel")])
    store.update(strong, title="kernel work")
    assert [r["id"] for r in store.search_sessions("kernel")] == [strong, weak]


def test_search_is_maintained_incrementally(store: Store) -> None:
    sid = store.create_session(messages=[SYSTEM])
    assert store.search_sessions("zeppelin") == []
    store.checkpoint(sid, [SYSTEM, user("a zeppelin appears")])
    assert [r["id"] for r in store.search_sessions("zeppelin")] == [sid]
    store.delete(sid)
    assert store.search_sessions("zeppelin") == []


def test_recover_answers_open_calls_by_phase_and_is_idempotent(store: Store) -> None:
    sid = store.create_session(messages=[SYSTEM, user("go")])
    messages = [SYSTEM, user("go"), assistant(None, "started", "planned")]
    store.checkpoint(sid, messages, planned_calls=True)
    store.mark_started(sid, ["started"])
    recovered = store.recover(sid)
    assert recovered[-2:] == [result("started", INTERRUPTED_NOTICE),
                              result("planned", NOT_STARTED_NOTICE)]
    assert store.recover(sid) == recovered
    record = store.load_session(sid)
    assert record["messages"] == recovered
    assert record["transcript"][-2:] == recovered[-2:]
    assert len(record["transcript"]) == 5
    assert pairing_problems(record["messages"]) == []


def test_untracked_open_calls_are_outcome_unknown(store: Store) -> None:
    sid = store.create_session(messages=[SYSTEM, user("go"), assistant(None, "c1")])
    assert store.recover(sid)[-1] == result("c1", INTERRUPTED_NOTICE)


def test_recover_drops_results_whose_call_is_missing(store: Store) -> None:
    messages = [SYSTEM, user("go"), result("ghost"), assistant(None, "c1"), result("c1"),
                result("c1", "duplicate"), user("next")]
    sid = store.create_session(messages=messages)
    recovered = store.recover(sid)
    assert recovered == [SYSTEM, user("go"), assistant(None, "c1"), result("c1"), user("next")]
    record = store.load_session(sid)
    assert record["messages"] == recovered
    assert record["transcript"] == messages  # the transcript keeps what was persisted
    assert store.recover(sid) == recovered


def test_load_shows_a_sendable_context_without_writing(store: Store) -> None:
    sid = store.create_session(messages=[SYSTEM, user("go"), assistant(None, "c1")])
    assert store.load_session(sid)["messages"][-1] == result("c1", INTERRUPTED_NOTICE)
    assert store.info(sid).context_messages == 3  # nothing written by the load


def test_results_clear_the_write_ahead_record(store: Store, stores: Stores) -> None:
    sid = store.create_session(messages=[SYSTEM])
    messages = [SYSTEM, user("go"), assistant(None, "c1")]
    store.checkpoint(sid, messages, planned_calls=True)
    store.mark_started(sid, ["c1"])
    store.checkpoint(sid, [*messages, result("c1")])
    assert stores.rows(store, "SELECT count(*) FROM tool_calls") == [(0,)]


def test_replace_context_keeps_transcript_and_records_compaction(
    store: Store, stores: Stores
) -> None:
    old = [SYSTEM, user("old turn"), assistant("old answer"), user("new turn")]
    sid = store.create_session(messages=old)
    summary = {"role": "user", "content": "<session_context_data>old stuff</session_context_data>"}
    store.replace_context(
        sid, [SYSTEM, summary, user("new turn")],
        compaction={"before_tokens": 100, "after_tokens": 40, "summary": "old stuff"},
        expect_prefix=old,
    )
    record = store.load_session(sid)
    assert record["messages"] == [SYSTEM, summary, user("new turn")]
    assert record["transcript"] == old
    assert record["compactions"][0]["before_tokens"] == 100
    assert [r["id"] for r in store.search_sessions("old answer")] == [sid]  # still found
    # a later checkpoint extends the compacted context
    store.checkpoint(sid, [SYSTEM, summary, user("new turn"), assistant("done")])
    assert stores.open(store.memory_dir).load_session(sid)["messages"][-1] == assistant("done")
    with pytest.raises(ContextConflict):
        store.replace_context(sid, [SYSTEM], expect_prefix=old)


def test_summaries(store: Store) -> None:
    sid = store.create_session(messages=[SYSTEM])
    store.ensure_summary(sid)
    assert store.info(sid).summary == "Session ended without messages."
    other = store.create_session(
        messages=[SYSTEM] + [user(f"question {i}") for i in range(8)] + [result("x")]
    )
    store.ensure_summary(other)
    summary = store.info(other).summary
    assert summary.splitlines() == [f"user: question {i}" for i in range(2, 8)]
    store.update(other, summary="Model-written.")
    store.ensure_summary(other)
    assert store.info(other).summary == "Model-written."


def test_fork_is_a_deep_independent_copy(store: Store) -> None:
    messages = [SYSTEM, user("shared"), assistant(None, "c1")]
    sid = store.create_session(messages=messages)
    store.update(sid, state={"todos": [{"id": 1, "text": "t"}]}, summary="sum")
    store.update(sid, title="Original")
    fork = store.fork(sid)
    copy = store.load_session(fork)
    source = store.load_session(sid)
    assert copy["parent_id"] == sid and copy["id"] == fork
    assert copy["title"] == "Original" and copy["summary"] == "sum"
    assert copy["state"]["todos"] == source["state"]["todos"]  # usage starts again: see
    assert copy["messages"] == source["messages"]  # open call answered in the copy
    assert pairing_problems(copy["messages"]) == []
    store.checkpoint(fork, [*copy["messages"], user("only in the fork")])
    assert store.load_session(sid)["messages"] == source["messages"]
    assert [r["id"] for r in store.search_sessions("only in the fork")] == [fork]
    assert {r["id"] for r in store.search_sessions("shared")} == {sid, fork}


def test_delete_removes_record_but_keeps_lock_file(store: Store, stores: Stores) -> None:
    sid = store.create_session(messages=[SYSTEM, user("bye")])
    store.delete(sid)
    if isinstance(store, SessionStore):
        assert store.lock_path(sid).exists()
    with pytest.raises(SessionNotFound):
        store.load_session(sid)
    with pytest.raises(SessionNotFound):
        store.delete(sid)
    remaining = stores.rows(
        store,
        "SELECT (SELECT count(*) FROM transcript) + (SELECT count(*) FROM context)"
        " + (SELECT count(*) FROM message_text) + (SELECT count(*) FROM session_text)",
    )
    assert remaining == [(0,)]


def test_update_rejects_unknown_fields_and_statuses(store: Store) -> None:
    sid = store.create_session()
    with pytest.raises(TypeError, match="colour"):
        store.update(sid, colour="red")
    with pytest.raises(UsageError):
        store.update(sid, status="exploded")
    store.update(sid, status="active")
    assert store.info(sid).status == "active"


def test_damaged_row_is_reported_by_session(store: Store, stores: Stores) -> None:
    sid = store.create_session(messages=[SYSTEM, user("fine")])
    healthy = store.create_session(messages=[SYSTEM])
    stores.write(store, "UPDATE transcript SET body = '{broken' WHERE seq = 1")
    fresh = stores.open(store.memory_dir)
    with pytest.raises(Exception, match=f"Session '{sid}' is damaged"):
        fresh.load_session(sid)
    assert fresh.load_session(healthy)["messages"] == [SYSTEM]


def test_export_has_format_version_and_round_trips(
    store: Store, stores: Stores, tmp_path: Path
) -> None:
    sid = store.create_session(messages=[SYSTEM, user("portable")], project_root="/p")
    record = export_session(store, sid)
    assert record["format_version"] == 1
    path = tmp_path / "s.json"
    path.write_text(json.dumps(record))
    other = stores.open_other(tmp_path / "elsewhere")
    [imported] = import_paths(other, path)
    assert imported.session_id == sid and not imported.error
    again = export_session(other, sid)
    assert {k: v for k, v in again.items() if k != "updated_at"} == {
        k: v for k, v in record.items() if k != "updated_at"
    }
    [second] = import_paths(other, path)
    assert second.skipped
