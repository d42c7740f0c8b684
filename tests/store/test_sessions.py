"""Finding and continuing sessions in the store, on both backends: listings (project scope,
previews without wrappers, sessions nobody typed in), titles by source, id prefixes, fork at
any message (pairing valid at every cut, lineage, inherited usage), rewind (the transcript
unchanged, the tail kept as a fork), and the migration of older databases."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from actors.core.budget import UsageTotals
from actors.core.compaction import summary_message
from actors.core.errors import AmbiguousSessionId, SessionNotFound, UsageError
from actors.core.ids import ALPHABET, new_session_id
from actors.core.messages import call_ids_of, pairing_problems
from actors.store import Store, _branches
from tests.support.stores import Stores

SYSTEM = {"role": "system", "content": "You are a coding agent."}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def answer(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def calls(*ids: str) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": c, "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
        for c in ids
    ]}


def result(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": f"result of {call_id}"}


@pytest.fixture
def store(stores: Stores, memory_dir: Path) -> Store:
    return stores.open(memory_dir)


def conversation() -> list[dict[str, Any]]:
    """Three user turns, the second with a batch of two tool calls, the third with one."""
    return [
        SYSTEM,
        user("first question"), answer("first answer"),                       # 2, 3
        user("second question"), calls("a", "b"), result("a"), result("b"),   # 4 .. 7
        answer("second answer"),                                              # 8
        user("third question"), calls("c"), result("c"), answer("third"),     # 9 .. 12
    ]


# -- listings -------------------------------------------------------------------------------


def test_listing_is_scoped_to_a_project_and_skips_sessions_nobody_typed_in(store: Store) -> None:
    here = store.create_session(messages=[SYSTEM, user("fix the parser")], project_root="/a")
    there = store.create_session(messages=[SYSTEM, user("other project")], project_root="/b")
    empty = store.create_session(messages=[SYSTEM], project_root="/a")
    listed = store.list_sessions(project_root="/a", include_empty=False)
    assert [s["id"] for s in listed] == [here]
    assert {s["id"] for s in store.list_sessions(include_empty=False)} == {here, there}
    assert empty in {s["id"] for s in store.list_sessions()}  # scripts still see every row
    item = listed[0]
    assert item["messages"] == 2 and item["user_messages"] == 1
    assert item["preview"] == "fix the parser"
    assert item["title"] == "fix the parser" and item["title_source"] == "provisional"
    assert item["fork_point"] is None and item["parent_id"] is None
    assert store.list_sessions(project_root="/a", include_empty=False, limit=0) == []


def test_previews_follow_the_latest_exchange_or_summary_never_the_wrappers(store: Store) -> None:
    messages = [SYSTEM, user("investigate the cache bug"), answer("the key omits the locale")]
    sid = store.create_session(messages=messages)
    messages += [user("now fix it\nand run the tests"), answer("fixed")]
    store.checkpoint(sid, messages)
    assert store.info(sid).preview == "now fix it and run the tests"
    # A compaction puts a wrapped summary in the user's role: not a preview, not a title.
    store.replace_context(sid, [SYSTEM, summary_message("they fixed the cache"), *messages[3:]],
                          compaction={"before_tokens": 90, "after_tokens": 40,
                                      "summary": "they fixed the cache"})
    compacted = store.load_context(sid)
    store.checkpoint(sid, [*compacted, answer("anything else?")])
    info = store.info(sid)
    assert info.preview == "now fix it and run the tests" and info.user_messages == 2
    store.ensure_summary(sid)
    summary = store.info(sid).summary
    assert "session_context_data" not in summary and "Earlier conversation" not in summary
    assert store.info(sid).preview == "now fix it and run the tests"  # the fallback keeps it
    store.update(sid, summary="Fixed the cache key; tests pass.")
    assert store.list_sessions()[0]["preview"] == "Fixed the cache key; tests pass."
    store.checkpoint(sid, [*store.load_context(sid), user("one more thing")])
    assert store.info(sid).preview == "one more thing"


def test_titles_by_source_a_users_title_is_never_replaced(store: Store) -> None:
    sid = store.create_session(messages=[SYSTEM])
    assert store.info(sid).title_source == ""
    long = "Please look at the failing integration tests in the payments module " * 3
    store.checkpoint(sid, [SYSTEM, user(long)])
    info = store.info(sid)
    assert info.title_source == "provisional"
    assert info.title.startswith("Please look at the failing") and len(info.title) <= 61
    assert store.propose_title(sid, "Payments test failures")
    assert (store.info(sid).title, store.info(sid).title_source) == (
        "Payments test failures", "model")
    assert [r["id"] for r in store.search_sessions("payments failures")] == [sid]
    store.update(sid, title="My own name")
    assert not store.propose_title(sid, "Something else")
    assert (store.info(sid).title, store.info(sid).title_source) == ("My own name", "user")
    store.checkpoint(sid, [SYSTEM, user(long), answer("ok"), user("more")])
    assert store.info(sid).title == "My own name"
    titled = store.create_session(messages=[SYSTEM, user("hi")], title="Given")
    assert (store.info(titled).title, store.info(titled).title_source) == ("Given", "user")


def test_search_hits_carry_message_numbers_and_a_project_scope(store: Store) -> None:
    sid = store.create_session(messages=conversation(), project_root="/a")
    store.create_session(messages=[SYSTEM, user("second question elsewhere")], project_root="/b")
    hits = store.search_sessions("second question", project_root="/a")
    assert [h["id"] for h in hits] == [sid]
    transcript = store.load_session(sid)["transcript"]
    hit = transcript[hits[0]["message"] - 1]  # the message its snippet was cut from
    assert "question" in hit["content"] and "question" in hits[0]["snippet"]
    assert len(store.search_sessions("second question")) == 2
    store.update(sid, title="Parser work")
    assert store.search_sessions("parser")[0]["message"] is None  # the title matched


# -- ids --------------------------------------------------------------------------------------


def test_new_ids_have_no_look_alike_characters() -> None:
    ids = {new_session_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(len(i) == 10 and set(i) <= set(ALPHABET) for i in ids)
    assert not set(ALPHABET) & set("0oO1lIi")


def test_any_unique_prefix_names_a_session(store: Store) -> None:
    first = store.create_session("k3m9x2p7qa", [SYSTEM, user("a")], title="Cache")
    second = store.create_session("k3m4zzzzzz", [SYSTEM, user("b")])
    old = store.create_session("GQQLwoi8ZD", [SYSTEM, user("c")])
    assert store.resolve_id("k3m9") == first
    assert store.resolve_id("k3m4") == second
    assert store.resolve_id(first) == first
    assert store.resolve_id("GQQL") == old
    assert store.resolve_id("gqql") == old  # case is ignored when nothing matches as typed
    with pytest.raises(AmbiguousSessionId) as caught:
        store.resolve_id("k3m")
    assert set(caught.value.candidates) == {first, second}
    assert "k3m9x2p7qa (Cache)" in str(caught.value) and caught.value.exit_code == 2
    with pytest.raises(SessionNotFound):
        store.resolve_id("zzz")
    exact = store.create_session("k3m", [SYSTEM, user("d")])
    assert store.resolve_id("k3m") == exact  # an exact id wins over longer ones


# -- fork at N ----------------------------------------------------------------------------------


def test_fork_at_every_message_keeps_pairing_valid(store: Store) -> None:
    messages = conversation()
    sid = store.create_session(messages=messages)
    transcript = store.load_session(sid)["transcript"]
    for n in range(1, len(messages) + 1):
        fork = store.fork(sid, at=n)
        record = store.load_session(fork)
        context = record["messages"]
        assert pairing_problems(context) == [], n
        point = record["fork_point"]
        assert point >= n and record["parent_id"] == sid
        assert context == messages[:point], n  # the results of an open batch come along
        assert record["transcript"] == transcript[:point]
        # A cut at a call, or inside its results, moves past them; nowhere else.
        assert point == {5: 7, 6: 7, 10: 11}.get(n, n)
    assert store.load_session(sid)["transcript"] == transcript  # the parent untouched


def test_fork_at_a_message_compaction_summarised_starts_from_the_transcript(
    store: Store,
) -> None:
    messages = conversation()
    sid = store.create_session(messages=messages)
    compacted = [SYSTEM, summary_message("two turns happened"), *messages[8:]]
    store.replace_context(sid, compacted, compaction={
        "before_tokens": 200, "after_tokens": 80, "summary": "two turns happened"})
    kept = store.load_session(store.fork(sid, at=10))  # still in the context: as it is
    assert kept["messages"] == compacted[:5]
    assert len(kept["compactions"]) == 1
    early = store.load_session(store.fork(sid, at=3))  # summarised away: from the transcript
    assert early["messages"] == messages[:3] and early["compactions"] == []
    assert store.info(store.fork(sid, at=3)).preview == "first question"


def test_fork_starts_its_own_usage_counter(store: Store) -> None:
    sid = store.create_session(messages=conversation())
    spent = UsageTotals(1000, 200, 0.25, 4).to_state()
    store.update(sid, state={**spent, "tool_calls": 3, "todos": [{"id": 1, "text": "t"}]})
    fork = store.fork(sid, at=4)
    usage = UsageTotals.from_state(store.info(fork).state)
    assert (usage.total_cost_usd, usage.calls, usage.total_tokens_in) == (0.0, 0, 0)
    assert usage.inherited is not None and usage.inherited.cost_usd == 0.25
    assert store.info(fork).state["tool_calls"] == 0
    assert store.info(fork).state["todos"] == [{"id": 1, "text": "t"}]
    again = UsageTotals.from_state(store.info(store.fork(fork)).state)
    assert again.inherited is not None and again.inherited.cost_usd == 0.25  # a fork of a fork


def test_fork_at_a_number_the_session_does_not_have_is_refused(store: Store) -> None:
    sid = store.create_session(messages=[SYSTEM, user("hi")])
    for bad in (0, 3, -1):
        with pytest.raises(UsageError, match="messages 1 to 2"):
            store.fork(sid, at=bad)


# -- rewind ---------------------------------------------------------------------------------


def test_rewind_moves_the_context_back_and_keeps_the_tail_as_a_fork(store: Store) -> None:
    messages = conversation()
    sid = store.create_session(messages=messages)
    transcript = store.load_session(sid)["transcript"]
    assert [(m.number, m.text) for m in store.user_messages(sid)] == [
        (2, "first question"), (4, "second question"), (9, "third question")]
    rewound = store.rewind(sid, before=4)
    assert rewound.messages == messages[:3]
    assert store.load_context(sid) == messages[:3]
    record = store.load_session(sid)
    assert record["transcript"] == transcript  # never rewritten
    assert pairing_problems(record["messages"]) == []
    tail = store.load_session(rewound.fork_id)
    assert tail["messages"] == messages and tail["parent_id"] == sid
    assert store.info(sid).preview == "first question"
    # The conversation goes on from there; the transcript only grows.
    again = [*rewound.messages, user("a different second question"), answer("other")]
    store.checkpoint(sid, again)
    record = store.load_session(sid)
    assert record["messages"] == again
    assert record["transcript"] == transcript + again[3:]
    assert [m.number for m in store.user_messages(sid)] == [2, 13]
    # A fork at a message numbers the transcript; each keeps its own branch.
    assert store.load_session(store.fork(sid, at=14))["messages"] == again
    assert store.load_session(store.fork(sid, at=8))["messages"] == messages[:8]
    with pytest.raises(UsageError, match="not one you typed"):
        store.rewind(sid, before=9)  # on the abandoned branch now
    with pytest.raises(UsageError, match="not one you typed"):
        store.rewind(sid, before=3)  # an answer, not a user message


def test_a_rewind_cut_short_leaves_no_fork_and_the_context_as_it_was(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The fork's copy and the move of the context are one transaction: a failure (or a
    # kill -9) after the copy leaves neither.
    messages = conversation()
    sid = store.create_session(messages=messages)
    before = {s["id"] for s in store.list_sessions()}

    def cut(*_args: Any) -> None:
        raise RuntimeError("cut after the fork's copy")

    monkeypatch.setattr(_branches, "parent_of", cut)
    with pytest.raises(RuntimeError, match="cut after"):
        store.rewind(sid, before=4)
    monkeypatch.undo()
    assert {s["id"] for s in store.list_sessions()} == before
    assert store.load_context(sid) == messages
    rewound = store.rewind(sid, before=4)  # and it can still be done
    assert {s["id"] for s in store.list_sessions()} == before | {rewound.fork_id}


def test_rewind_to_before_every_typed_message_keeps_pairing_valid(store: Store) -> None:
    messages = conversation()
    sid = store.create_session(messages=messages)
    for point in store.user_messages(sid):
        copy = store.fork(sid)  # a fresh whole copy for each rewind
        rewound = store.rewind(copy, before=point.number)
        assert rewound.messages == messages[: point.number - 1], point
        assert pairing_problems(store.load_context(copy)) == [], point
        assert store.load_session(rewound.fork_id)["messages"] == messages  # the tail kept


def test_rewind_past_a_compaction_rebuilds_the_branch(store: Store) -> None:
    messages = conversation()
    sid = store.create_session(messages=messages)
    store.replace_context(sid, [SYSTEM, summary_message("earlier"), *messages[8:]],
                          compaction={"before_tokens": 200, "after_tokens": 80,
                                      "summary": "earlier"})
    rewound = store.rewind(sid, before=4)
    assert rewound.messages == messages[:3]
    store.checkpoint(sid, [*rewound.messages, user("again")])
    assert store.load_context(sid)[-1] == user("again")


# -- cleaning up --------------------------------------------------------------------------------


def test_abandoned_empty_sessions_are_removed_running_ones_kept(store: Store) -> None:
    dead = store.create_session(messages=[SYSTEM], status="active")
    running = store.create_session(messages=[SYSTEM], status="active")
    saved = store.create_session(messages=[SYSTEM])  # a script's session: not a dead run
    used = store.create_session(messages=[SYSTEM, user("hi")], status="active")
    with store.lease(running):
        assert store.remove_abandoned() == [dead]
    assert not store.exists(dead)
    assert store.exists(running) and store.exists(saved) and store.exists(used)


# -- migration --------------------------------------------------------------------------------


def _old_rows(conn: Any, param: str) -> None:
    rows = [
        ("old1", "Named", [SYSTEM, user("typed"), answer("x")]),
        ("old2", "", [SYSTEM, summary_message("s")]),
    ]
    for sid, title, messages in rows:
        conn.execute(
            "INSERT INTO sessions (id, created_at, updated_at, title, transcript_len,"
            f" context_len) VALUES ({param}, 't', 't', {param}, {param}, {param})",
            (sid, title, len(messages), len(messages)),
        )
        (rid,) = conn.execute(f"SELECT rid FROM sessions WHERE id = {param}", (sid,)).fetchone()
        for seq, message in enumerate(messages):
            body = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
            conn.execute(
                f"INSERT INTO transcript (session_rid, seq, body) VALUES ({param}, {param},"
                f" {param})", (rid, seq, body),
            )
            conn.execute(
                f"INSERT INTO context (session_rid, pos, mid) SELECT {param}, {param}, mid"
                f" FROM transcript WHERE session_rid = {param} AND seq = {param}",
                (rid, seq, rid, seq),
            )


def test_an_older_sqlite_database_is_migrated(memory_dir: Path) -> None:
    from actors.store import SqliteStore
    from actors.store.sqlite._schema import _MIGRATIONS

    memory_dir.mkdir(mode=0o700)
    (memory_dir / "sessions").mkdir(mode=0o700)
    conn = sqlite3.connect(memory_dir / "sessions.sqlite3")
    for version in (1, 2):
        for statement in _MIGRATIONS[version].split(";"):
            if statement.strip():
                conn.execute(statement)
    conn.execute("PRAGMA user_version = 2")
    _old_rows(conn, "?")
    conn.commit()
    conn.close()
    store = SqliteStore(memory_dir)
    assert (store.info("old1").title_source, store.info("old1").user_messages) == ("user", 1)
    assert store.info("old2").user_messages == 0  # a summary is not something typed
    assert [s["id"] for s in store.list_sessions(include_empty=False)] == ["old1"]
    store.close()


def test_an_older_postgresql_schema_is_migrated(pg_stores: Stores, memory_dir: Path) -> None:
    import psycopg

    from actors.store.postgres import _schema

    url = pg_stores.fresh_url()
    assert url is not None
    with psycopg.connect(url, autocommit=True) as conn:
        trgm = _schema._trgm_schema(conn)
        for statement in _schema._MIGRATIONS[1]:
            conn.execute(statement.replace("{trgm}", f'"{trgm}"'))
        conn.execute("CREATE TABLE harness_schema (version INTEGER NOT NULL)")
        conn.execute("INSERT INTO harness_schema VALUES (1)")
        _old_rows(conn, "%s")
    from actors.store import open_store

    store = open_store(memory_dir, url)
    try:
        assert (store.info("old1").title_source, store.info("old1").user_messages) == ("user", 1)
        assert store.info("old2").user_messages == 0
        assert [s["id"] for s in store.list_sessions(include_empty=False)] == ["old1"]
        fork = store.fork("old1", at=2)
        assert store.load_context(fork) == [SYSTEM, user("typed")]
        assert call_ids_of(store.load_context(fork)[-1]) == []
    finally:
        store.close()


def test_opening_and_closing_leave_when_a_session_was_last_used(store: Store) -> None:
    sid = store.create_session(messages=[SYSTEM, user("q"), answer("a")])
    before = store.info(sid).updated_at
    store.update(sid, status="active")  # a resume opens it
    store.update(sid, state={"approvals": []}, status="saved")  # and closes it
    store.ensure_summary(sid)  # the fallback summary of a session that had none
    after = store.info(sid)
    assert after.updated_at == before and after.summary
    store.update(sid, title="Renamed")  # the user's doing: it counts
    assert store.info(sid).updated_at > before


def test_a_fork_at_a_message_has_no_summary_of_what_came_after(store: Store) -> None:
    sid = store.create_session(messages=conversation())
    store.update(sid, summary="Answered the third question about zebras.")
    fork = store.fork(sid, 3)
    assert store.info(fork).summary == ""  # its own is written when it is first closed
    assert [s["id"] for s in store.search_sessions("zebras")] == [sid]
    whole = store.fork(sid)  # a whole copy: the same conversation, the same summary
    assert store.info(whole).summary == store.info(sid).summary
