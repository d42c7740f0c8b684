"""``harness -p PROMPT --output-format json|stream-json`` in a real subprocess against the
scripted server: the objects are parsed, as a script would, and checked against the store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from actors.store import SessionStore
from actors.testing.scripted_server import Fail, Reply, ScriptedServer, ToolCall
from tests.support.clitools import harness

pytestmark = pytest.mark.slow  # every test here starts a Python process


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    (path / "notes.txt").write_text("the answer is 42\n")
    return path.resolve()


def run(server: ScriptedServer, memory_dir: Path, project: Path, *args: str) -> Any:
    return harness("-p", "what do the notes say?", "--base-url", server.base_url,
                   "--price-in", "0.5", "--price-out", "1", *args,
                   memory_dir=memory_dir, cwd=project, env={"OPENAI_API_KEY": "test"})


def script() -> list[Reply]:
    return [
        Reply(tool_calls=[ToolCall("read_file", {"path": "notes.txt"}, id="call_1")],
              usage=(1000, 10)),
        Reply("The notes say the answer is 42.", usage=(1200, 20)),
    ]


def test_json_is_one_object_with_the_answer_usage_cost_and_tool_calls(
    memory_dir: Path, project: Path
) -> None:
    with ScriptedServer(script()) as server:
        result = run(server, memory_dir, project, "--output-format", "json")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 1  # one object, on one line: nothing else on stdout
    out = json.loads(lines[0])
    assert out["type"] == "result" and out["outcome"] == "answered" and not out["is_error"]
    assert out["answer"] == "The notes say the answer is 42." and out["error"] is None
    assert out["exit_code"] == 0
    assert out["usage"] == {"model_calls": 2, "input_tokens": 2200, "output_tokens": 30}
    assert out["cost_usd"] == pytest.approx(2.2 * 0.5 + 0.03 * 1)
    [call] = out["tool_calls"]
    assert call["id"] == "call_1" and call["name"] == "read_file" and call["ok"] is True
    assert call["arguments"] == {"path": "notes.txt"}
    assert "42" in call["result"]
    with SessionStore(memory_dir) as store:  # the id names the saved session
        info = store.info(out["session_id"])
    assert info.user_messages == 1 and info.title == "what do the notes say?"


def test_stream_json_is_one_event_per_line_in_order(memory_dir: Path, project: Path) -> None:
    with ScriptedServer(script()) as server:
        result = run(server, memory_dir, project, "--output-format", "stream-json")
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    kinds = [e["type"] for e in events]
    assert kinds[0] == "session" and kinds[-1] == "result"
    assert kinds.index("tool_call") < kinds.index("tool_result") < kinds.index("text")
    assert "".join(e["text"] for e in events if e["type"] == "text") == (
        "The notes say the answer is 42.")
    session, result_event = events[0], events[-1]
    assert session["session_id"] == result_event["session_id"] and not session["resumed"]
    assert result_event["answer"] == "The notes say the answer is 42."


def test_a_failed_turn_is_an_error_object_with_exit_1(memory_dir: Path, project: Path) -> None:
    with ScriptedServer([Fail(400, "model 'nope' not found")]) as server:
        result = run(server, memory_dir, project, "--output-format", "json")
    assert result.returncode == 1
    out = json.loads(result.stdout)
    assert out["outcome"] == "failed" and out["is_error"] and out["exit_code"] == 1
    assert out["answer"] == "" and "not found" in out["error"]
    assert "Traceback" not in result.stderr


def test_a_usage_mistake_still_gives_a_script_its_object(
    memory_dir: Path, project: Path
) -> None:
    with ScriptedServer([]) as server:
        result = run(server, memory_dir, project, "--output-format", "json",
                     "--resume", "nosuchsession")
        assert server.requests == []
    assert result.returncode == 2
    out = json.loads(result.stdout)
    assert out["outcome"] == "failed" and out["exit_code"] == 2 and out["session_id"] is None
    assert "No saved session" in out["error"]
    assert len(result.stderr.strip().splitlines()) == 1


def test_output_format_without_a_prompt_is_refused(memory_dir: Path, project: Path) -> None:
    result = harness("--output-format", "json", "--list-sessions", memory_dir=memory_dir,
                     cwd=project)
    assert result.returncode == 2 and "--output-format goes with -p" in result.stderr


def test_failed_runs_leave_no_session_and_continue_picks_the_work(
    memory_dir: Path, project: Path
) -> None:
    def ask(server: ScriptedServer, text: str, *args: str) -> Any:
        return harness("-p", text, "--base-url", server.base_url, "--llm-timeout", "30",
                       *args, memory_dir=memory_dir, cwd=project,
                       env={"OPENAI_API_KEY": "test"})

    with ScriptedServer([Reply("Real work done.")]) as server:
        work = ask(server, "the real work")
        assert work.returncode == 0, work.stderr
    work_id = work.stderr.split()[1]
    with ScriptedServer([Fail(400, "no such thing")] * 3) as server:  # not retried
        for _ in range(3):
            failed = ask(server, "hello")
            assert failed.returncode == 1
            assert "Traceback" not in failed.stderr
            gone = failed.stderr.split()[1]
            assert f"nothing was answered, so session {gone} was not kept" in failed.stderr
    listed = harness("--list-sessions", "--json", memory_dir=memory_dir, cwd=project)
    assert [s["id"] for s in json.loads(listed.stdout)] == [work_id]
    with ScriptedServer([Fail(400, "down")]) as server:  # the next message of the work fails
        failed = ask(server, "and then this", "-c")
        assert failed.returncode == 1 and work_id in failed.stderr
        assert "was not kept" not in failed.stderr  # a resumed session is kept
    with ScriptedServer([Reply("Back on it.")]) as server:
        again = ask(server, "try again", "-c")
        assert again.returncode == 0, again.stderr
        assert again.stderr.split()[1] == work_id
        sent = server.requests[0]["messages"]
    roles = [m["role"] for m in sent]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user"]
    assert sent[3]["content"] == "and then this" and "No answer" in sent[4]["content"]
