"""``--export ID --format atif``: a session with tool calls and a fork, made by the real harness
against the scripted server, exported and validated against ATIF's pydantic models (the
``atif`` package, which follows Harbor's ``harbor.models.trajectories``): steps numbered from 1,
tool calls and their observations linked by call id, the fork embedded as a sub-trajectory and
referred to from the step it was cut after, the usage of both in the final metrics."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import atif
import pytest

from actors.store import Store
from actors.store._atif import to_atif
from actors.store.peers import import_sessions
from actors.testing.scripted_server import Reply, ScriptedServer, ToolCall
from tests.support.clitools import harness
from tests.support.stores import Stores

FIXTURES = Path(__file__).parents[1] / "support" / "fixtures" / "peers"


def linked(trajectory: dict[str, Any]) -> None:
    """Harbor's rule, stricter than the package's: every observation result that names a
    call names one of its own step's calls."""
    for step in trajectory["steps"]:
        calls = {c["tool_call_id"] for c in step.get("tool_calls", [])}
        for result in step.get("observation", {}).get("results", []):
            if result.get("source_call_id") is not None:
                assert result["source_call_id"] in calls, step
    for sub in trajectory.get("subagent_trajectories", []):
        linked(sub)


@pytest.mark.slow
def test_a_session_with_tools_and_a_fork_exports_as_valid_atif(
    tmp_path: Path, memory_dir: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("the answer is 42\n")
    env = {"OPENAI_API_KEY": "test"}

    def run(*args: str) -> Any:
        result = harness(*args, memory_dir=memory_dir, cwd=project, env=env)
        assert result.returncode == 0, result.stderr
        return result

    script = [Reply(tool_calls=[ToolCall("read_file", {"path": "notes.txt"}, id="call_1")],
                    usage=(1000, 10)),
              Reply("The notes say 42.", usage=(1200, 20)),
              Reply("In the fork too.", usage=(900, 5))]
    with ScriptedServer(script, check_tool_pairing=True) as server:
        first = run("-p", "what do the notes say?", "--base-url", server.base_url,
                    "--price-in", "1", "--price-out", "2", "--output-format", "json")
        session = json.loads(first.stdout)["session_id"]
        fork = json.loads(run("--fork", session, "--at", "4", "--json").stdout)["id"]
        run("--resume", fork, "-p", "and in the fork?", "--base-url", server.base_url,
            "--price-in", "1", "--price-out", "2")
    exported = json.loads(run("--export", session, "--format", "atif").stdout)
    parsed = atif.Trajectory.model_validate(exported)
    assert parsed.schema_version == "ATIF-v1.7" and exported["session_id"] == session
    linked(exported)
    steps = exported["steps"]
    assert [s["source"] for s in steps] == ["system", "user", "agent", "agent"]
    [call] = steps[2]["tool_calls"]
    assert call == {"tool_call_id": "call_1", "function_name": "read_file",
                    "arguments": {"path": "notes.txt"}}
    result, forked = steps[2]["observation"]["results"]
    assert result["source_call_id"] == "call_1" and "the answer is 42" in result["content"]
    # the fork: embedded, referred to from the step holding message 4 (the tool result)
    [ref] = forked["subagent_trajectory_ref"]
    [sub] = exported["subagent_trajectories"]
    assert ref["trajectory_id"] == sub["trajectory_id"] == fork
    assert ref["extra"] == {"relation": "fork", "fork_point": 4}
    assert [s.get("is_copied_context", False) for s in sub["steps"]] == [
        True, True, True, False, False]
    assert sub["steps"][-1]["message"] == "In the fork too."
    assert sub["final_metrics"]["total_prompt_tokens"] == 900
    totals = exported["final_metrics"]
    assert totals["total_prompt_tokens"] == 1000 + 1200 + 900
    assert totals["total_completion_tokens"] == 10 + 20 + 5
    assert totals["total_steps"] == 4
    assert totals["total_cost_usd"] == pytest.approx(
        json.loads(first.stdout)["cost_usd"] + sub["final_metrics"]["total_cost_usd"])
    refused = harness("--export", session, "--files", "--format", "atif",
                      memory_dir=memory_dir, cwd=project)
    assert refused.returncode == 2 and "ATIF has no place" in refused.stderr


def test_an_imported_session_exports_as_valid_atif(stores: Stores, memory_dir: Path) -> None:
    store: Store = stores.open(memory_dir)
    walked = import_sessions(store, FIXTURES / "codex")
    [session] = [r.session_id for r in walked.results if r.session_id]
    assert session is not None
    exported = to_atif(store, session)
    atif.Trajectory.model_validate(exported)
    linked(exported)
    assert exported["agent"]["model_name"] == "gpt-5.1-codex"
    assert exported["extra"]["imported_from"]["format"] == "codex"
    assert exported["extra"]["compactions"][0]["summary"].startswith("The user asked")
    calls = {c["tool_call_id"]: c for s in exported["steps"] for c in s.get("tool_calls", [])}
    assert calls["call_Kx2"]["arguments"]["input"].startswith("*** Begin Patch")
    assert "subagent_trajectories" not in exported
