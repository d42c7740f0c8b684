"""benchmarks/turn.py in small: it runs against the supervisor as it is, and its timing
hooks see every phase of a turn (a supervisor change that breaks it fails here, not on the
next person to take figures). No figure is asserted: only that each was measured."""

from __future__ import annotations

import json

import pytest

from benchmarks import turn as bench


def test_the_turn_benchmark_runs_and_times_every_phase(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert bench.main(["--quick", "--lengths", "5,13", "--turns", "4", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    rows = report["overhead"]
    assert [r["target_messages"] for r in rows] == [5, 13]
    for row in rows:
        assert row["turns"] > 0 and row["server_ms"] > 0
        # each hook saw its phase: a wrapper that no longer wraps leaves a 0 here
        for figure in ("model_client_ms", "checkpoint_ms", "store_ms", "tools_ms",
                       "http_ms", "sdk_ms"):
            assert row[figure] > 0, figure
        # the user's message, the answer with its read's result, the final answer
        assert row["writes"] == 3
    assert [run["turns"] for run in report["long_sessions"]] == [4, 4]
    assert all(run["final_messages"] > 4 * 4 for run in report["long_sessions"])


def test_a_renamed_method_fails_the_benchmark_loudly() -> None:
    class Owner:
        async def present(self) -> int:
            return 1

    phases: dict[str, float] = {}
    with pytest.raises(AttributeError):
        bench.time_into(Owner(), "gone", phases, "x")
