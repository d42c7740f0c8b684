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
from tests.stores import Stores

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
    """A real index, watched: what the transcript holds, inside the transaction and seen
    from another connection, when the store adds messages to the index."""

    def __init__(self, inner: SearchIndex, other: Store) -> None:
        self.inner = inner
        self.other = other
        self.seen: list[tuple[int, int]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def add_messages(self, conn: Conn, rid: int, rows: Any) -> None:
        sql = "SELECT count(*) FROM transcript WHERE session_rid = ?"
        inside = conn.execute(sql, (rid,)).fetchone()[0]
        with self.other.db.read() as elsewhere:
            outside = elsewhere.execute(sql, (rid,)).fetchone()[0]
        self.seen.append((inside, outside))
        self.inner.add_messages(conn, rid, rows)


def test_messages_are_indexed_inside_the_checkpoint_transaction(
    stores: Stores, memory_dir: Path
) -> None:
    store, other = stores.open(memory_dir), stores.open(memory_dir)
    sid = store.create_session(messages=[SYSTEM])
    store.index = WatchingIndex(store.index, other)
    store.checkpoint(sid, [SYSTEM, user("first"), user("second")])
    assert store.index.seen == [(3, 1)]  # written together, not yet visible elsewhere
    assert [r["id"] for r in other.search_sessions("second")] == [sid]


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
    assert changes_of(batch, planned_calls=True) == {"a": None, "b": "planned"}
    assert changes_of(batch, planned_calls=False) == {"a": None}
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
