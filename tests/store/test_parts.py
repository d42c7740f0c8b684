"""The parts a store is built from (actors/store/_parts.py), each on its own and on both
backends: transactions, the search index, the write-ahead records and search's ranking; and a
store composed by hand from SQLite's parts."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from actors.core.errors import StorageError
from actors.core.messages import INTERRUPTED_NOTICE, NOT_STARTED_NOTICE
from actors.store import Store
from actors.store._parts import Backend, Conn, SearchIndex
from actors.store._search import SESSION_TEXT_BONUS, query_terms, snippet, term_hits
from actors.store._store import private_memory_dir
from actors.store._write_ahead import changes_of, notice_for
from actors.store.sqlite._database import DB_NAME, SqliteDatabase
from actors.store.sqlite._index import Fts5Index
from actors.store.sqlite._lease import FlockLeases
from tests.support.stores import Stores, pending_index

SYSTEM = {"role": "system", "content": "s"}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def call(*ids: str) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": i, "type": "function", "function": {"name": "run_bash", "arguments": "{}"}}
        for i in ids]}


@pytest.fixture
def store(stores: Stores, memory_dir: Path) -> Store:
    return stores.open(memory_dir)


def _legacy_rows(store: Store) -> list[Any]:
    with store.db.read() as conn:
        return list(conn.execute("SELECT name FROM legacy_files"))


# -- transactions ---------------------------------------------------------------------------


def test_a_write_transaction_is_rolled_back_whole(store: Store) -> None:
    with pytest.raises(RuntimeError), store.db.write() as conn:
        conn.execute("INSERT INTO legacy_files (name, size, mtime_ns) VALUES ('a', 1, 1)")
        raise RuntimeError("after the first statement")
    assert _legacy_rows(store) == []


def test_a_failing_statement_is_a_storage_error_and_the_store_goes_on(store: Store) -> None:
    with pytest.raises(StorageError, match="no_such_table"), store.db.write() as conn:
        conn.execute("INSERT INTO legacy_files (name, size, mtime_ns) VALUES ('a', 1, 1)")
        conn.execute("SELECT * FROM no_such_table")
    assert _legacy_rows(store) == []
    sid = store.create_session(messages=[SYSTEM])
    assert store.load_context(sid) == [SYSTEM]


# -- the search index -----------------------------------------------------------------------


def _rid(store: Store, session_id: str) -> int:
    with store.db.read() as conn:
        return int(conn.execute("SELECT rid FROM sessions WHERE id = ?", (session_id,))
                   .fetchone()[0])


def test_the_index_counts_matching_messages_per_session(store: Store) -> None:
    a = store.create_session(messages=[SYSTEM, user("Zeppelin one"), user("zeppelin two zq")])
    b = store.create_session(messages=[SYSTEM, user("one ZEPPELIN")])
    rid_a, rid_b = _rid(store, a), _rid(store, b)
    with store.db.read() as conn:
        found = {rid: (count, mid) for rid, count, mid in store.index.message_matches(
            conn, "zeppelin")}
        short = [rid for rid, _, _ in store.index.message_matches(conn, "zq")]  # no trigram
        texts = store.index.texts(conn, "message", [found[rid_a][1]])
    assert {rid: count for rid, (count, _) in found.items()} == {rid_a: 2, rid_b: 1}
    assert short == [rid_a]
    assert list(texts.values()) == ["zeppelin two zq"]


def test_session_text_is_replaced_not_added(store: Store) -> None:
    sid = store.create_session(title="Old title")
    rid = _rid(store, sid)
    with store.lease(sid), store.db.write(sid) as conn:
        store.index.set_session_text(conn, rid, "New title\nsummary")
    with store.db.read() as conn:
        assert list(store.index.session_matches(conn, "old")) == []
        assert list(store.index.session_matches(conn, "new")) == [rid]
        assert store.index.texts(conn, "session", [rid]) == {rid: "New title\nsummary"}


def test_rid_among_selects_exactly_those_rows(store: Store) -> None:
    ids = [store.create_session() for _ in range(4)]
    rids = [_rid(store, sid) for sid in ids]
    among, params = store.index.rid_among(rids[1:3])
    with store.db.read() as conn:
        rows = conn.execute(f"SELECT id FROM sessions WHERE rid {among}", params).fetchall()
    assert sorted(r[0] for r in rows) == sorted(ids[1:3])


class WatchingIndex:
    """A real index, watched: what another connection sees of the transcript when the
    store adds messages to the index."""

    def __init__(self, inner: SearchIndex, other: Store) -> None:
        self.inner = inner
        self.other = other
        self.seen: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def add_messages(self, conn: Conn, rid: int, rows: Any) -> None:
        with self.other.db.read() as elsewhere:
            self.seen.append(elsewhere.execute(
                "SELECT count(*) FROM transcript WHERE session_rid = ?", (rid,)).fetchone()[0])
        self.inner.add_messages(conn, rid, rows)


def test_a_checkpoint_marks_its_messages_and_the_index_follows_after_its_commit(
    stores: Stores, memory_dir: Path
) -> None:
    store, other = stores.open(memory_dir), stores.open(memory_dir)
    sid = store.create_session(messages=[SYSTEM])
    store.index = WatchingIndex(store.index, other)
    store.checkpoint(sid, [SYSTEM, user("first"), user("second")])
    assert store.index.seen == [] and pending_index(store) == 2  # no postings in the checkpoint
    assert store.unindexed == 2
    assert store.index_pending() is True
    assert store.index.seen == [3]  # the messages were committed before they were indexed
    assert pending_index(store) == 0 and store.unindexed == 0
    assert [r["id"] for r in other.search_sessions("second")] == [sid]


def test_search_catches_up_with_what_is_not_indexed_yet(stores: Stores, memory_dir: Path) -> None:
    store = stores.open(memory_dir)
    sid = store.create_session(messages=[SYSTEM])
    with store.lease(sid):
        store.append(sid, [user("quokka one"), user("quokka two")], at=1)
    store.close()  # not indexed: the marks are durable, committed with the messages
    again = stores.open(memory_dir)
    assert pending_index(again) == 2
    [found] = again.search_sessions("quokka")
    assert found["id"] == sid and "quokka" in found["snippet"]
    assert pending_index(again) == 0


def test_the_indexer_goes_in_batches_and_skips_what_was_deleted(store: Store) -> None:
    keep = store.create_session(messages=[SYSTEM])
    gone = store.create_session(messages=[SYSTEM])
    store.checkpoint(keep, [SYSTEM, *(user(f"wombat {i}") for i in range(5))])
    store.checkpoint(gone, [SYSTEM, user("wombat gone")])
    store.delete(gone)
    assert pending_index(store) == 5
    assert store.index_pending(limit=2) is False
    assert store.index_pending(limit=2) is False
    assert store.index_pending(limit=2) is True
    [found] = store.search_sessions("wombat")
    assert found["id"] == keep
    with store.db.read() as conn:
        count = dict((rid, n) for rid, n, _ in store.index.message_matches(conn, "wombat"))
    assert list(count.values()) == [5]


def test_messages_after_a_deleted_session_are_indexed(store: Store) -> None:
    """Deleting the session that holds the newest rows lets new rows take their ids again
    (SQLite): they must still be indexed, and the deleted ones never found."""
    keep = store.create_session(messages=[SYSTEM, user("echidna kept")])
    gone = store.create_session(messages=[SYSTEM, *(user(f"echidna gone {i}") for i in range(4))])
    store.catch_up_index()
    store.delete(gone)
    new = store.create_session(messages=[SYSTEM])
    with store.lease(new):
        store.append(new, [user("echidna new one"), user("echidna new two")], at=1)
    found = {r["id"]: r for r in store.search_sessions("echidna")}
    assert set(found) == {keep, new}
    assert [r["id"] for r in store.search_sessions("gone")] == []
    with store.db.read() as conn:
        count = {rid: n for rid, n, _ in store.index.message_matches(conn, "echidna")}
    assert sorted(count.values()) == [1, 2]


def test_two_indexers_never_index_a_message_twice(stores: Stores, memory_dir: Path) -> None:
    a, b = stores.open(memory_dir), stores.open(memory_dir)
    sid = a.create_session(messages=[SYSTEM])
    a.checkpoint(sid, [SYSTEM, *(user(f"numbat {i}") for i in range(10))])
    a.index_pending(limit=3)
    b.index_pending(limit=3)
    a.catch_up_index()
    b.catch_up_index()
    with a.db.read() as conn:
        [(_, count, _)] = list(a.index.message_matches(conn, "numbat"))
    assert count == 10


def _history(store: Store, deferred: bool) -> None:
    """The same sessions, written with the index caught up after every write (as it was kept
    inside the checkpoints) or left to search (``deferred``)."""
    def after() -> None:
        if not deferred:
            store.catch_up_index()

    for n in range(6):
        sid = f"s{n}-{'later' if deferred else 'at-once'}"
        store.create_session(sid, [SYSTEM], title=f"Session {n}")
        messages = [SYSTEM]
        for k in range(8):
            messages = [*messages, user(f"turn {k} of {n}: the parser error {k * n % 5}"),
                        call(f"c{n}{k}"),
                        {"role": "tool", "tool_call_id": f"c{n}{k}",
                         "content": f"traceback line {k}\n" * (k + 1) + "kafka" * (n == 3)}]
            store.checkpoint(sid, messages, planned_calls=True)
            after()
        if n == 2:
            store.replace_context(sid, [SYSTEM, user("summary: rebalance")],
                                  compaction={"before_tokens": 9, "after_tokens": 2,
                                              "summary": "rebalance of the parser"})
            after()
        if n == 4:
            store.update(sid, title="Kafka rebalance", summary="a summary")
            after()
        if n == 1:
            store.delete(sid)
            after()


def test_search_results_are_the_same_whether_indexed_at_once_or_caught_up(
    stores: Stores, tmp_path: Path
) -> None:
    at_once = stores.open(tmp_path / "a" / "memory")
    later = stores.open(tmp_path / "b" / "memory")
    _history(at_once, deferred=False)
    assert pending_index(at_once) == 0
    _history(later, deferred=True)
    assert pending_index(later) > 0

    def shown(results: list[dict[str, Any]], suffix: str) -> list[tuple[str, str, str]]:
        return [(r["id"].split("-")[0], r["title"], r["snippet"])
                for r in results if r["id"].endswith(suffix)]  # (one schema on PostgreSQL)

    for query in ("parser error", "kafka", "rebalance", "traceback line 7", "zz", "turn 3 of"):
        found = shown(later.search_sessions(query), "-later")  # catches up first
        assert found == shown(at_once.search_sessions(query), "-at-once"), query
    assert at_once.search_sessions("parser")  # the queries found something


def test_a_store_is_its_parts(tmp_path: Path) -> None:
    memory_dir = private_memory_dir(tmp_path / "memory")
    db = SqliteDatabase(memory_dir / DB_NAME)
    store = Store(memory_dir, Backend(db, FlockLeases(memory_dir / "sessions"), Fts5Index()),
                  import_legacy=False)
    with store:
        sid = store.create_session(messages=[SYSTEM, user("composed by hand")])
        with store.lease(sid):
            assert store.leases.is_held_here(sid)
            assert (memory_dir / "sessions" / f"{sid}.lock").exists()
        assert [r["id"] for r in store.search_sessions("by hand")] == [sid]
        assert store.location == str(memory_dir / DB_NAME)


# -- write-ahead records and what recovery answers -----------------------------------------


def test_write_ahead_changes_of_a_batch() -> None:
    batch = [call("a", "b"), {"role": "tool", "tool_call_id": "a", "content": "done"}]
    # "a", made and answered here, was never recorded: nothing is written for it
    assert changes_of(batch, planned_calls=True) == {"b": "planned"}
    assert changes_of(batch, planned_calls=False) == {}
    results = [{"role": "tool", "tool_call_id": "b", "content": "done"}]  # recorded before
    assert changes_of(results, planned_calls=False) == {"b": None}
    notice = notice_for({"b": "planned", "c": "started"})
    assert [notice(i) for i in ("b", "c", "untracked")] == [
        NOT_STARTED_NOTICE, INTERRUPTED_NOTICE, INTERRUPTED_NOTICE]


# -- search's meaning, apart from any index -------------------------------------------------


def test_query_terms_are_distinct_lowercase_words_longest_first() -> None:
    assert query_terms("Cache, cache-KEY  locale!") == ["locale", "cache", "key"]
    assert query_terms("  ... ") == []


def test_a_session_text_match_outranks_message_counts() -> None:
    hits = term_hits([(1, 20, 100), (2, 1, 200)], [2, 3])
    assert hits[1] == (math.log1p(20), "message", 100)
    assert hits[2] == (math.log1p(1) + SESSION_TEXT_BONUS, "message", 200)
    assert hits[3] == (SESSION_TEXT_BONUS, "session", 3)  # snippet from the session text
    assert hits[2][0] > hits[1][0]


def test_snippets_are_cut_around_the_first_match_on_one_line() -> None:
    text = "x " * 100 + "the Needle\nis here " + "y " * 100
    cut = snippet(text, ["needle"])
    assert cut.startswith("…") and cut.endswith("…") and "\n" not in cut
    assert "the Needle is here" in cut
    assert snippet("short text", ["absent"]) == "short text"
