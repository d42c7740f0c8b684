"""The listing's pure functions (repl/listing.py): the table (empty, forks marked, cut to a
width) and times as people read them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from repl import listing

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def item(sid: str, **more: object) -> dict[str, object]:
    return {"id": sid, "updated_at": (NOW - timedelta(hours=3)).isoformat(), "messages": 4,
            "status": "saved", "title": "Cache work", "preview": "fix the key", **more}


def test_a_table_of_no_rows_is_its_header() -> None:
    assert listing.table([], now=NOW) == [
        "ID  UPDATED  MSGS  STATUS  TITLE · PREVIEW"]
    assert len(listing.table([], with_project=True, width=40, now=NOW, mark="x")) == 1


def test_forks_are_marked_before_their_title() -> None:
    rows = listing.table([item("k3m9parent"),
                          item("f0rkf0rk22", parent_id="k3m9parent", fork_point=4),
                          item("c0pyc0py33", parent_id="k3m9parent")], now=NOW)
    assert rows[1].endswith("3 h ago     4  saved   Cache work · fix the key")
    assert rows[2].endswith("saved   ↳ fork of k3m9parent at 4 · Cache work · fix the key")
    assert rows[3].endswith("saved   ↳ fork of k3m9parent · Cache work · fix the key")
    assert all(len(row) <= 50 for row in listing.table([item("f0rkf0rk22")], width=50,
                                                        now=NOW))


def test_times_are_relative_while_recent_then_a_local_date() -> None:
    def at(delta: timedelta) -> str:
        return (NOW - delta).isoformat()

    local = (NOW - timedelta(hours=3)).astimezone().strftime("%Y-%m-%d %H:%M")
    assert listing.when(at(timedelta(hours=3)), NOW) == f"3 h ago ({local})"
    assert listing.ago(at(timedelta(seconds=20)), NOW) == "just now"
    assert listing.ago(at(timedelta(days=1, hours=2)), NOW) == "yesterday"
    old = NOW - timedelta(days=90)
    assert listing.ago(old.isoformat(), NOW) == old.astimezone().date().isoformat()
    assert listing.when(old.isoformat(), NOW) == old.astimezone().strftime("%Y-%m-%d %H:%M")
    assert listing.when("not a time", NOW) == "not a time"
