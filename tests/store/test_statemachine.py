"""A hypothesis state machine over store operations, checked against a plain-list model, on
both backends (PostgreSQL: a fresh schema per example, when AGENT_HARNESS_TEST_PG is set)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from actors.core.errors import ContextConflict
from actors.core.messages import repair
from actors.store import Store, open_store
from tests.support.stores import SKIP_REASON, Schemas, pg_server_url
from tests.support.strict import unavailable


class StoreMachine(RuleBasedStateMachine):
    """On SQLite; :class:`PostgresStoreMachine` runs the same rules on PostgreSQL."""

    url: str | None = None

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp())
        self.store: Store = open_store(self.dir, self.url)
        self.counter = 0
        self.sid = self.store.create_session(messages=[{"role": "system", "content": "sys"}])
        self.context: list[dict[str, Any]] = [{"role": "system", "content": "sys"}]
        self.transcript = list(self.context)

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _word(self) -> str:
        self.counter += 1
        return f"tok{self.counter}x"

    @rule(kinds=st.lists(st.sampled_from(["user", "assistant", "calls", "results"]),
                         min_size=1, max_size=4))
    def append(self, kinds: list[str]) -> None:
        new: list[dict[str, Any]] = []
        for kind in kinds:
            if kind == "calls":
                ids = [self._word(), self._word()]
                new.append({"role": "assistant", "content": None, "tool_calls": [
                    {"id": i, "type": "function", "function": {"name": "grep", "arguments": "{}"}}
                    for i in ids]})
            elif kind == "results":
                open_ids = [m["tool_call_id"] for m in repair(self.context + new).added]
                new += [{"role": "tool", "tool_call_id": i, "content": self._word()}
                        for i in open_ids[:1]]
            else:
                new.append({"role": kind, "content": self._word()})
        self.store.checkpoint(self.sid, self.context + new, state={"n": self.counter})
        self.context += new
        self.transcript += new

    @precondition(lambda self: len(self.context) > 1)
    @rule()
    def conflicting_checkpoint_is_refused(self) -> None:
        changed = [*self.context[:-1], {"role": "user", "content": "rewritten"}]
        with pytest.raises(ContextConflict):
            self.store.checkpoint(self.sid, changed)

    @precondition(lambda self: len(self.context) > 2)
    @rule()
    def compact(self) -> None:
        summary = {"role": "user", "content": f"<session_context_data>{self._word()}"}
        replacement = [self.context[0], summary, self.context[-1]]
        self.store.replace_context(
            self.sid, replacement,
            compaction={"before_tokens": 10, "after_tokens": 5, "summary": "s"},
            expect_prefix=self.context,
        )
        self.context = replacement

    @rule()
    def recover(self) -> None:
        fixed = repair(self.context)
        assert self.store.recover(self.sid) == fixed.messages
        self.context = fixed.messages
        self.transcript += fixed.added

    @rule()
    def reopen(self) -> None:
        self.store.close()
        self.store = open_store(self.dir, self.url)

    @invariant()
    def matches_model(self) -> None:
        record = self.store.load_session(self.sid)
        assert record["transcript"] == self.transcript
        assert record["messages"] == repair(self.context).messages
        assert record["state"].get("n", 0) <= self.counter

    @invariant()
    def every_word_is_searchable(self) -> None:
        last = next((m for m in reversed(self.transcript) if m.get("content")), None)
        if last is not None and last["content"].startswith("tok"):
            hits = self.store.search_sessions(last["content"])
            assert [h["id"] for h in hits] == [self.sid]


class PostgresStoreMachine(StoreMachine):
    def __init__(self) -> None:
        server = pg_server_url()
        if server is None:
            unavailable(SKIP_REASON)
        self.schemas = Schemas(server)
        self.url = self.schemas.new()
        super().__init__()

    def teardown(self) -> None:
        super().teardown()
        self.schemas.drop_all()


TestStoreMachine = StoreMachine.TestCase
TestStoreMachine.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)
TestPostgresStoreMachine = PostgresStoreMachine.TestCase
TestPostgresStoreMachine.settings = settings(
    max_examples=40, stateful_step_count=25, deadline=None
)
