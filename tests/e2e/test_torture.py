"""The crash-torture run (benchmarks/torture.py) in small, and the checks it relies on.

The end-to-end test SIGKILLs the real ``harness -p`` up to eight times at seeded moments of
a long tool conversation and requires every loss figure to be 0 (about 20 s). The other
tests show that the request check catches what it must (unsaved, reordered or invented
messages) and that the scripted model is reproducible.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from actors.core.compaction import summary_message
from actors.runtime.compactor import SUMMARY_PROMPT
from actors.testing.scripted_server import Reply
from actors.testing.torture import (
    LOSS_FIGURES,
    Figures,
    TaskModel,
    draw_plan,
    missing_from_transcript,
    run_torture,
    token_of,
)

SYSTEM = {"role": "system", "content": "You are a test."}
USER = {"role": "user", "content": "continue the task (run 0)"}
CALL = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "call_0_0", "type": "function",
     "function": {"name": "run_bash", "arguments": '{"command": "true"}'}}]}
RESULT = {"role": "tool", "tool_call_id": "call_0_0", "content": "exit status 0"}


@pytest.mark.slow
def test_torture_run_loses_nothing(tmp_path: Path) -> None:
    figures = run_torture(8, seed=11, workdir=tmp_path / "torture", context_room=1500)
    losses = {name: getattr(figures, name) for name in LOSS_FIGURES}
    assert losses == dict.fromkeys(LOSS_FIGURES, 0), "\n".join(figures.problems)
    assert figures.kills > 0
    assert figures.kills_during_run_bash > 0 and figures.processes_at_kill > 0
    assert figures.survivors == 0
    assert figures.resumes > 0
    assert figures.requests_served > figures.iterations
    assert figures.tool_calls_executed > 0
    assert figures.ok


def test_a_request_showing_unsaved_messages_is_caught() -> None:
    transcript = [SYSTEM, USER, CALL, RESULT]
    assert missing_from_transcript({"messages": transcript}, transcript, []) is None
    # the transcript may hold more than the request (e.g. a compacted-away turn)
    assert missing_from_transcript({"messages": [SYSTEM, USER]}, transcript, []) is None
    why = missing_from_transcript({"messages": transcript}, transcript[:3], [])
    assert why is not None and "message 2 (tool)" in why
    # in order: a reordering is a loss too
    swapped = {"messages": [SYSTEM, RESULT, CALL]}
    assert missing_from_transcript(swapped, transcript, []) is not None


def test_only_the_last_request_of_a_killed_run_may_end_with_unsaved_messages() -> None:
    # A request goes out while the checkpoint of what it adds commits: killed then, its
    # tail is missing, all of it. A gap before a saved message is still a loss.
    transcript = [SYSTEM, USER]
    request = {"messages": [SYSTEM, USER, CALL, RESULT]}
    assert missing_from_transcript(request, transcript, [], unsaved_tail=True) is None
    assert missing_from_transcript(request, transcript, []) is not None
    gap = {"messages": [SYSTEM, CALL, USER]}
    assert missing_from_transcript(gap, transcript, [], unsaved_tail=True) is not None


def test_summary_blocks_must_come_from_a_saved_compaction() -> None:
    request = {"messages": [SYSTEM, summary_message("older turns"), USER]}
    assert missing_from_transcript(request, [SYSTEM, USER], ["older turns"]) is None
    assert missing_from_transcript(request, [SYSTEM, USER], ["another"]) is not None


def test_a_summary_request_is_checked_on_the_messages_it_carries() -> None:
    carried = {"role": "user", "content": json.dumps([USER, CALL, RESULT])}
    request = {"messages": [{"role": "system", "content": SUMMARY_PROMPT}, carried]}
    assert missing_from_transcript(request, [SYSTEM, USER, CALL, RESULT], []) is None
    assert missing_from_transcript(request, [SYSTEM, USER, CALL], []) is not None


def test_the_scripted_model_is_reproducible_and_never_reuses_a_token() -> None:
    body = {"messages": [SYSTEM, USER], "tools": [{}]}
    first, second = TaskModel(seed=5), TaskModel(seed=5)
    replies = [first(body) for _ in range(30)]
    assert replies == [second(body) for _ in range(30)]
    assert all(isinstance(r, Reply) for r in replies)
    calls = [c for r in replies if isinstance(r, Reply) for c in r.tool_calls]
    assert len({c.id for c in calls}) == len(calls) > 20
    bash = [c for c in calls if c.name == "run_bash"]
    assert bash and all(token_of(str(c.id)) in c.arguments_text for c in bash)
    texts = [r for r in replies if isinstance(r, Reply) and not r.tool_calls]
    assert len(texts) == 6  # every fifth request ends the turn
    summary = first({"messages": [{"role": "system", "content": SUMMARY_PROMPT}, USER]})
    assert isinstance(summary, Reply) and summary.text and not summary.tool_calls


def test_kill_plans_cover_every_kind_of_moment() -> None:
    rng = random.Random(0)
    kinds = {draw_plan(rng).kind for _ in range(200)}
    assert kinds == {"clock", "request", "stream-end", "tool", "bash"}


def test_figures_are_ok_only_without_loss() -> None:
    assert Figures(kills=3, resumes=3).ok
    for name in LOSS_FIGURES:
        assert not Figures(**{name: 1}).ok  # type: ignore[arg-type]
