"""Hooks on the session's events, with real processes and a real supervisor against a scripted
server: each event fires with Claude Code's JSON (a hook records its stdin), exit 2 blocks a
tool call, a prompt and a stop, a slow hook is cut at its timeout with its process group, and
what hooks say reaches the model as <hook_output> data (actors/hooks/, the supervisor's and the
executor's calls)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from actors.core.events import Notice, ToolCallFinished
from actors.core.messages import SHOWN
from actors.store import SessionStore
from actors.testing.scripted_server import Reply, ScriptedServer, ToolCall, tool_pairing_errors
from actors.testing.torture import is_summary_request
from repl.session_commands import describe
from tests.support.runtime import pid_alive, running, settings_for

pytestmark = pytest.mark.anyio
EVENTS = ("SessionStart", "SessionEnd", "UserPromptSubmit", "PreToolUse", "PostToolUse",
          "Stop", "PreCompact")
LONG = "This answer goes into detail. " * 40


def user_hooks(tmp_path: Path, hooks: dict[str, Any]) -> None:
    """The user's settings file of a run whose memory directory is ``tmp_path/memory``."""
    (tmp_path / "settings.json").write_text(json.dumps({"hooks": hooks}))


def on(command: str, matcher: str = "", **more: Any) -> list[dict[str, Any]]:
    return [{"matcher": matcher, "hooks": [{"type": "command", "command": command, **more}]}]


def recorded(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


class Model:
    """Chat requests answered in turn; the compactor's summary request answered apart."""

    def __init__(self, answers: list[Reply]) -> None:
        self.answers = answers
        self.chat: list[dict[str, Any]] = []

    def __call__(self, body: dict[str, Any]) -> Reply:
        if is_summary_request(body):
            return Reply("Summary: a tool ran, two answers.")
        self.chat.append(body)
        return self.answers.pop(0) if self.answers else Reply("ok")


async def test_each_event_fires_with_claude_codes_json(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    user_hooks(tmp_path, {event: on(f"{{ cat; echo; }} >> {log}") for event in EVENTS})
    model = Model([Reply(tool_calls=[ToolCall("run_bash", {"command": "echo hi"}, id="c1")]),
                   Reply(LONG), Reply(LONG)])
    with ScriptedServer(model) as server:
        settings = settings_for(tmp_path, server.base_url)
        store = SessionStore(settings.memory_dir)
        async with running(settings, store) as (sup, _):
            assert (await sup.run_turn("first question")).ok
            assert (await sup.run_turn("second question")).ok
            assert (await sup.compact()).applied
        session = sup.session_id
        async with running(settings, store, resume=session):
            pass
        fork = store.fork(session)
        async with running(settings, store, resume=fork):
            pass
    events = recorded(log)
    assert [(e["hook_event_name"], e.get("source") or e.get("reason") or e.get("trigger")
             or e.get("tool_name") or e.get("prompt")) for e in events] == [
        ("SessionStart", "startup"),
        ("UserPromptSubmit", "first question"),
        ("PreToolUse", "run_bash"),
        ("PostToolUse", "run_bash"),
        ("Stop", None),
        ("UserPromptSubmit", "second question"),
        ("Stop", None),
        ("PreCompact", "manual"),
        ("SessionStart", "compact"),
        ("SessionEnd", "prompt_input_exit"),
        ("SessionStart", "resume"),
        ("SessionEnd", "prompt_input_exit"),
        ("SessionStart", "fork"),
        ("SessionEnd", "prompt_input_exit"),
    ]
    project = str(settings.sandbox_dir)
    for event in events:
        assert event["session_id"] == (fork if event is events[-1] or event is events[-2]
                                       else session)
        assert event["cwd"] == project
        assert event["permission_mode"] == "dangerouslySkipPermissions"
        assert event["transcript_path"] is None
        assert event["export_command"].endswith(
            f"-m repl --export {event['session_id']} --memory-dir {settings.memory_dir}")
    start, _, pre, post, stop = events[:5]
    assert start["model"] == settings.model
    assert (pre["tool_input"], pre["tool_use_id"]) == ({"command": "echo hi"}, "c1")
    assert (post["tool_input"], post["tool_use_id"], post["tool_response"]) == (
        {"command": "echo hi"}, "c1", "exit status 0\nhi")
    assert stop["stop_hook_active"] is False
    assert stop["last_assistant_message"] == LONG
    assert events[7]["custom_instructions"] == ""


async def test_hooks_run_in_the_project_without_the_harnesss_secrets(tmp_path: Path) -> None:
    out = tmp_path / "env.txt"
    user_hooks(tmp_path, {"SessionStart": on(f"{{ pwd; env; }} > {out}")})
    os.environ["OPENAI_API_KEY_FOR_TEST"] = "sk-secret"
    try:
        with ScriptedServer([]) as server:
            settings = settings_for(tmp_path, server.base_url)
            async with running(settings):
                pass
    finally:
        del os.environ["OPENAI_API_KEY_FOR_TEST"]
    lines = out.read_text().splitlines()
    assert lines[0] == str(settings.sandbox_dir)
    assert f"HARNESS_PROJECT_DIR={settings.sandbox_dir}" in lines
    assert f"CLAUDE_PROJECT_DIR={settings.sandbox_dir}" in lines
    assert not [line for line in lines if line.startswith(("OPENAI_", "AGENT_HARNESS_"))]


async def test_exit_2_blocks_a_tool_call_whose_result_says_why(tmp_path: Path) -> None:
    marker = tmp_path / "project" / "marker"
    user_hooks(tmp_path, {"PreToolUse": on("echo 'no rm -rf in this project' >&2; exit 2",
                                           "run_bash")})
    script = [Reply(tool_calls=[ToolCall("run_bash", {"command": f"touch {marker}"}, id="c1"),
                                ToolCall("read_file", {"path": "missing.txt"}, id="c2")]),
              Reply("I will not do that.")]
    with ScriptedServer(script) as server:
        settings = settings_for(tmp_path, server.base_url)
        store = SessionStore(settings.memory_dir)
        async with running(settings, store) as (sup, rec):
            result = await sup.run_turn("clean up")
        sent = server.requests[1]["messages"]
    assert result.ok and not marker.exists()
    assert tool_pairing_errors(sent) == []
    [blocked] = [m for m in sent if m.get("tool_call_id") == "c1"]
    assert blocked["content"] == ('<tool_result name="run_bash">\nBlocked by a PreToolUse '
                                  "hook: no rm -rf in this project\nDo not retry it "
                                  "unchanged.\n</tool_result>")
    assert [m for m in sent if m.get("tool_call_id") == "c2"]  # the batch went on
    [finished] = [e for e in rec.of(ToolCallFinished) if e.call_id == "c1"]
    assert finished.status == "denied"
    assert any("PreToolUse hook (run_bash)" in n.text and "blocked the call: no rm -rf" in n.text
               for n in rec.of(Notice))
    [record] = store.info(sup.session_id).state["hooks"]
    assert (record["event"], record["outcome"], record["exit_code"], record["said"]) == (
        "PreToolUse", "blocked", 2, "no rm -rf in this project")
    shown = describe(store.info(sup.session_id))  # --info and \\info
    at = shown.index("Hooks:        1 outcome kept; the last:")
    assert shown[at + 1].endswith("PreToolUse blocked (exit 2) `echo 'no rm -rf in this "
                                  "project' >&2; exit 2`: no rm -rf in this project")


async def test_exit_2_blocks_a_prompt_which_is_neither_sent_nor_kept(tmp_path: Path) -> None:
    user_hooks(tmp_path, {"UserPromptSubmit": on(
        "grep -q password && { echo 'That looks like a password.' >&2; exit 2; }; exit 0")})
    with ScriptedServer([Reply("Hello.")]) as server:
        settings = settings_for(tmp_path, server.base_url)
        store = SessionStore(settings.memory_dir)
        async with running(settings, store) as (sup, _):
            blocked = await sup.run_turn("my password is hunter2")
            assert (await sup.run_turn("hello")).ok
        assert len(server.requests) == 1
        assert "hunter2" not in json.dumps(server.requests[0])
    assert (blocked.outcome, blocked.text) == (
        "failed", "A UserPromptSubmit hook blocked the message: That looks like a password.")
    transcript = store.load_session(sup.session_id)["transcript"]
    assert "hunter2" not in json.dumps(transcript)


async def test_a_stop_hook_keeps_the_turn_going_with_its_reason(tmp_path: Path) -> None:
    log, flag = tmp_path / "stops.jsonl", tmp_path / "flag"
    user_hooks(tmp_path, {"Stop": on(
        f"{{ cat; echo; }} >> {log}; [ -e {flag} ] && exit 0; touch {flag}; "
        "echo 'The tests fail: fix test_api first.' >&2; exit 2")})
    with ScriptedServer([Reply("Done."), Reply("Fixed it.")]) as server:
        settings = settings_for(tmp_path, server.base_url)
        store = SessionStore(settings.memory_dir)
        async with running(settings, store) as (sup, _):
            result = await sup.run_turn("add an endpoint")
        sent = server.requests[1]["messages"]
    assert (result.outcome, result.text) == ("answered", "Fixed it.")
    assert sent[-2:] == [
        {"role": "assistant", "content": "Done."},
        {"role": "user", "content": '<hook_output event="Stop">\nThe tests fail: fix test_api '
                                    "first.\n</hook_output>"}]
    assert [e["stop_hook_active"] for e in recorded(log)] == [False, True]
    info = store.info(sup.session_id)
    assert info.user_messages == 1  # the hook's feedback is not something the user typed


async def test_a_slow_hook_is_cut_at_its_timeout_with_its_process_group(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    user_hooks(tmp_path, {"PreToolUse": on(f"sleep 300 & echo $$ $! > {pids}; wait",
                                           "run_bash", timeout=0.5)})
    script = [Reply(tool_calls=[ToolCall("run_bash", {"command": "echo ran"}, id="c1")]),
              Reply("ok")]
    with ScriptedServer(script) as server:
        settings = settings_for(tmp_path, server.base_url)
        async with running(settings) as (sup, rec):
            assert (await sup.run_turn("go")).ok
        sent = server.requests[1]["messages"]
    [result] = [m for m in sent if m.get("tool_call_id") == "c1"]
    assert "exit status 0\nran" in result["content"]  # a timeout is shown and ignored
    assert any("timed out after 0.5 s and was stopped" in n.text for n in rec.of(Notice))
    assert not [pid for pid in map(int, pids.read_text().split()) if pid_alive(pid)]


async def test_what_hooks_say_reaches_the_model_as_hook_output(tmp_path: Path) -> None:
    start = json.dumps({"hookSpecificOutput": {"hookEventName": "SessionStart",
                                               "additionalContext": "Branch: main, clean."}})
    user_hooks(tmp_path, {
        "SessionStart": on(f"echo '{start}'"),
        "UserPromptSubmit": on("echo 'Today is a release day.'"),
        "PostToolUse": on("echo 'lint: 2 warnings </hook_output> in x.py' >&2; exit 2",
                          "write_file"),
    })
    script = [Reply(tool_calls=[ToolCall("write_file", {"path": "x.py", "content": "x = 1\n"},
                                         id="c1")]),
              Reply("Written.")]
    with ScriptedServer(script) as server:
        settings = settings_for(tmp_path, server.base_url)
        store = SessionStore(settings.memory_dir)
        async with running(settings, store) as (sup, _):
            assert (await sup.run_turn("write x.py")).ok
        first, second = server.requests[0]["messages"], server.requests[1]["messages"]
    assert first[-1]["content"] == (
        'write x.py\n\n<hook_output event="SessionStart">\nBranch: main, clean.\n'
        '</hook_output>\n\n<hook_output event="UserPromptSubmit">\nToday is a release day.\n'
        "</hook_output>")
    [result] = [m for m in second if m.get("tool_call_id") == "c1"]
    assert result["content"].endswith(
        '</tool_result>\n<hook_output event="PostToolUse">\nlint: 2 warnings &lt;/hook_output> '
        "in x.py\n</hook_output>")
    [typed] = [m for m in store.load_session(sup.session_id)["transcript"]
               if m["role"] == "user"]
    assert typed[SHOWN] == "write x.py"  # what the user typed is kept for showing


async def test_a_pre_tool_use_answer_can_change_allow_or_deny(tmp_path: Path) -> None:
    deny = json.dumps({"hookSpecificOutput": {"permissionDecision": "deny",
                                              "permissionDecisionReason": "not on Fridays"}})
    change = json.dumps({"hookSpecificOutput": {"permissionDecision": "allow",
                                                "updatedInput": {"command": "echo changed"}}})
    user_hooks(tmp_path, {"PreToolUse": [
        {"matcher": "write_file", "hooks": [{"type": "command", "command": f"echo '{deny}'"}]},
        {"matcher": "run_bash", "hooks": [{"type": "command", "command": f"echo '{change}'"}]},
    ]})
    script = [Reply(tool_calls=[ToolCall("write_file", {"path": "a", "content": "a"}, id="w"),
                                ToolCall("run_bash", {"command": "echo asked"}, id="b")]),
              Reply("ok")]
    with ScriptedServer(script) as server:
        from actors.core.config import Mode

        settings = settings_for(tmp_path, server.base_url, mode=Mode.DEFAULT)
        async with running(settings) as (sup, rec):
            assert (await sup.run_turn("go")).ok
        sent = server.requests[1]["messages"]
    results = {m["tool_call_id"]: m["content"] for m in sent if m["role"] == "tool"}
    assert "Blocked by a PreToolUse hook: not on Fridays" in results["w"]
    assert "exit status 0\nchanged" in results["b"]
    assert rec.approvals == []  # allowed by the hook: the default mode did not ask
    assert not (settings.sandbox_dir / "a").exists()


async def test_continue_false_stops_the_turn_and_the_rest_of_the_batch(tmp_path: Path) -> None:
    stop = json.dumps({"continue": False, "stopReason": "the build is red"})
    user_hooks(tmp_path, {"PostToolUse": on(f"echo '{stop}'", "run_bash")})
    script = [Reply(tool_calls=[ToolCall("run_bash", {"command": "echo one"}, id="c1"),
                                ToolCall("run_bash", {"command": "echo two"}, id="c2")])]
    with ScriptedServer(script) as server:
        settings = settings_for(tmp_path, server.base_url)
        store = SessionStore(settings.memory_dir)
        async with running(settings, store) as (sup, _):
            result = await sup.run_turn("go")
            saved = list(sup.snapshot().messages)
    assert (result.outcome, result.text) == (
        "interrupted", "stopped by a PostToolUse hook: the build is red")
    results = {m["tool_call_id"]: m["content"] for m in saved if m["role"] == "tool"}
    assert "exit status 0\none" in results["c1"]
    assert "Not executed" in results["c2"] and "the build is red" in results["c2"]
    assert tool_pairing_errors(store.load_session(sup.session_id)["messages"]) == []


async def test_ctrl_c_during_a_hook_kills_it_and_the_call_never_started(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    user_hooks(tmp_path, {"PreToolUse": on(f"echo $$ > {pid_file}; exec sleep 300",
                                           "run_bash")})
    script = [Reply(tool_calls=[ToolCall("run_bash", {"command": "echo ran"}, id="c1")])]
    with ScriptedServer(script) as server:
        settings = settings_for(tmp_path, server.base_url)
        async with running(settings) as (sup, _):
            async with anyio.create_task_group() as tg:
                async def abort_when_running() -> None:
                    with anyio.fail_after(20):
                        while not (pid_file.exists()  # noqa: ASYNC110 (a file the hook writes)
                                   and pid_file.read_text().strip()):
                            await anyio.sleep(0.01)
                    sup.abort()

                tg.start_soon(abort_when_running)
                result = await sup.run_turn("go")
            saved = list(sup.snapshot().messages)
    assert result.outcome == "interrupted"
    assert not pid_alive(int(pid_file.read_text()))
    [answer] = [m for m in saved if m.get("tool_call_id") == "c1"]
    assert answer["content"].startswith('<tool_result name="run_bash">\nNot executed')


async def test_a_failing_hook_is_shown_and_ignored(tmp_path: Path) -> None:
    user_hooks(tmp_path, {"UserPromptSubmit": on("echo 'cannot reach the ticket server' >&2; "
                                                 "exit 1"),
                          "SessionStart": on("/no/such/hook-script")})
    with ScriptedServer([Reply("Hello.")]) as server:
        settings = settings_for(tmp_path, server.base_url)
        async with running(settings) as (sup, rec):
            assert (await sup.run_turn("hello")).ok
    said = [n.text for n in rec.of(Notice) if "hook" in n.text]
    assert ("SessionStart hook (startup) `/no/such/hook-script` exited 127 (ignored): "
            "bash: line 1: /no/such/hook-script: No such file or directory") in said
    assert ("UserPromptSubmit hook `echo 'cannot reach the ticket server' >&2; exit 1` exited 1"
            " (ignored): cannot reach the ticket server") in said


async def test_what_a_post_tool_use_hook_changes_belongs_to_the_call(tmp_path: Path) -> None:
    """A formatter run after an edit: its change is in the call's snapshot (a rewind undoes
    it with the call's), not a hand edit found later."""
    user_hooks(tmp_path, {"PostToolUse": on("sed -i 's/x=1/x = 1/' x.py", "write_file")})
    script = [Reply(tool_calls=[ToolCall("write_file", {"path": "x.py", "content": "x=1\n"},
                                         id="c1")]),
              Reply("Written.")]
    with ScriptedServer(script) as server:
        settings = settings_for(tmp_path, server.base_url)
        async with running(settings) as (sup, _):
            assert (await sup.run_turn("write x.py")).ok
            changed = "\n".join(await sup.files_changed(with_diff=True))
    assert (settings.sandbox_dir / "x.py").read_text() == "x = 1\n"
    assert "+x = 1" in changed and "x=1" not in changed
