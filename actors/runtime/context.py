"""The working context of the running session, with its one owner: the supervisor.

It is what the next model request is made of and what every checkpoint saves: the messages,
how many of them the store holds (``saved_len``), the pinned instructions, the token estimator
and the state saved beside the messages (the planning state as the tool executor last reported
it, usage totals, the tool-call count). Only the supervisor's own tasks read or change it.
Everyone else gets a :class:`ContextSnapshot`, a copy: the compactor plans from one, and tests
and benchmarks inspect one.

The rule for a compaction plan that arrives after the context moved on
(:meth:`WorkingContext.why_not`): it applies while the context still starts with the part the
summary was made from and the store holds that part; messages appended meanwhile are kept
after the summary. Anything else (recovery replaced the context, another compaction landed)
leaves the context unchanged.
"""

from __future__ import annotations

from collections.abc import MutableSequence, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from actors.core.budget import ContextEstimator, UsageTotals
from actors.core.compaction import CompactionPlan, compacted, part
from actors.core.messages import Message
from actors.core.planning import Planning
from actors.core.stored import StoredMessages


@dataclass(frozen=True)
class ContextSnapshot:
    """A read-only copy of the working context at one moment."""

    messages: Sequence[Message]  # a tuple, or a copy of the stored messages (unparsed)
    pinned: tuple[str, ...]
    tokens: int  # the estimated size of a request with these messages
    planning: Planning
    usage: UsageTotals
    tool_calls: int


@dataclass
class WorkingContext:
    # A list, or after a resume the stored messages (parsed only where read: actors.core.stored)
    messages: MutableSequence[Message] = field(default_factory=list)
    planning: Planning = field(default_factory=Planning)
    usage: UsageTotals = field(default_factory=UsageTotals)
    tool_calls: int = 0
    pinned: list[str] = field(default_factory=list)
    approvals: list[str] = field(default_factory=list)  # standing approvals of this run
    mode: str = ""  # the permission mode and the model the session runs with ("": the
    model: str = ""  # run's settings); saved, and restored by a resume
    estimator: ContextEstimator = field(default_factory=ContextEstimator)
    saved_len: int = 0  # how many of ``messages`` the store holds
    overhead: int = 0  # tokens every request carries besides its messages (tool schemas)
    # where an imported session came from (actors.store.peers): kept as it was, saved with
    # every checkpoint so that no later state loses it
    origin: dict[str, Any] | None = None

    @classmethod
    def restored(
        cls, messages: MutableSequence[Message], state: dict[str, Any], *, overhead: int
    ) -> WorkingContext:
        """The context of a resumed session: its messages and the state saved with them.

        Standing approvals are not restored: a resume starts asking again unless the user
        keeps them (the front end learns the saved ones from ``SessionOpened``)."""
        return cls(
            messages=messages,
            planning=Planning.from_state(state),
            usage=UsageTotals.from_state(state),
            tool_calls=int(state.get("tool_calls", 0)),
            pinned=[str(p) for p in state.get("pinned", [])],
            mode=str(state.get("mode") or ""),
            model=str(state.get("model") or ""),
            saved_len=len(messages),
            overhead=overhead,
            origin=origin if isinstance(origin := state.get("origin"), dict) else None,
        )

    def state(self) -> dict[str, Any]:
        """Planning, usage, pins, standing approvals, the mode and the model, and an
        imported session's origin: saved with every checkpoint."""
        state = {
            **self.planning.to_state(),
            "tool_calls": self.tool_calls,
            **self.usage.to_state(),
            "pinned": list(self.pinned),
            "approvals": list(self.approvals),
        }
        if self.mode:
            state["mode"] = self.mode
        if self.model:
            state["model"] = self.model
        if self.origin is not None:
            state["origin"] = self.origin
        return state

    def unsaved(self) -> tuple[int, list[Message]]:
        """How many messages the store holds, and those it does not hold yet (what the
        next checkpoint appends: it costs what was added, not the context's length)."""
        return self.saved_len, list(self.messages[self.saved_len :])

    def tokens(self) -> int:
        """Estimated size of the next request: the messages plus what every request carries."""
        return self.estimator.estimate(self.messages, overhead=self.overhead)

    def snapshot(self) -> ContextSnapshot:
        messages = self.messages
        return ContextSnapshot(
            messages=messages.copy() if isinstance(messages, StoredMessages) else tuple(messages),
            pinned=tuple(self.pinned),
            tokens=self.tokens(),
            planning=self.planning.copy(),
            usage=replace(self.usage),
            tool_calls=self.tool_calls,
        )

    # -- compaction ---------------------------------------------------------------------------

    def why_not(self, plan: CompactionPlan) -> str | None:
        """None if ``plan`` still applies to this context, else why not (for the user)."""
        cut = plan.split.cut
        if self.saved_len < cut:
            return "Compaction skipped: the context it summarised is not saved yet; unchanged."
        current, basis = self.messages, plan.basis
        if len(current) < cut or len(basis) != cut:
            return "The context changed during compaction; unchanged."
        same = current.same if isinstance(current, StoredMessages) else None
        for i in range(cut):  # the very messages, told apart unparsed where they are rows
            if same is not None and same(i, basis, i):
                continue
            a, b = current[i], basis[i]
            if a is not b and a != b:
                return "The context changed during compaction; unchanged."
        return None

    def compacted_by(self, plan: CompactionPlan) -> list[Message]:
        """What the store is to hold after ``plan``: the saved part of the context, compacted.
        (Call :meth:`compaction_saved` once the store holds it.)"""
        saved = part(self.messages, 0, self.saved_len)  # stored rows stay unparsed
        return compacted(saved, plan.split, plan.summary, self.pinned)

    def compaction_saved(self, stored: list[Message]) -> None:
        """The store now holds ``stored`` (:meth:`compacted_by`): the context becomes it plus
        the messages not saved yet, read now, because they may have grown while the store was
        being written (the caller holds the lock that keeps ``saved_len`` still)."""
        self.messages = [*stored, *self.messages[self.saved_len :]]
        self.saved_len = len(stored)
        self.estimator.reset()

    # -- rewind -------------------------------------------------------------------------------

    def rewound(self, messages: MutableSequence[Message]) -> None:
        """The store moved the context back to ``messages`` (a rewind, after a checkpoint:
        nothing was unsaved); the reported size no longer describes it."""
        self.messages = messages
        self.saved_len = len(messages)
        self.estimator.reset()
