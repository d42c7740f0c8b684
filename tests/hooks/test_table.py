"""The hooks of the settings files, checked as hostile input (actors/hooks/_table.py), and
what a hook's end says (actors/hooks/_answer.py): pure, no process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from actors.core.settings_files import Loaded, SettingsFile
from actors.hooks import HookCommand, Ran, answer, hook_table


def file(data: Any, scope: str = "user", approved: bool = True) -> SettingsFile:
    return SettingsFile(scope, Path(f"/{scope}/settings.json"),  # type: ignore[arg-type]
                        Loaded(data=data, digest="d", exists=True), approved)


def command(text: str, matcher: Any = "run_bash", **more: Any) -> dict[str, Any]:
    return {"matcher": matcher, "hooks": [{"type": "command", "command": text, **more}]}


def test_both_files_hooks_run_the_users_first_and_a_command_once() -> None:
    user = file({"hooks": {"PreToolUse": [command("a"), command("b", "*")]}})
    project = file({"hooks": {"PreToolUse": [command("b"), command("c", "edit_.*")]}},
                   "project")
    table, problems = hook_table([user, project])
    assert problems == []
    assert [c.command for c in table.commands_for("PreToolUse", "run_bash")] == ["a", "b"]
    assert [c.command for c in table.commands_for("PreToolUse", "edit_file")] == ["b", "c"]
    assert [c.scope for c in table.commands_for("PreToolUse", "edit_file")] == ["user",
                                                                               "project"]
    assert table.commands_for("PostToolUse", "run_bash") == []


def test_matchers_names_alternatives_and_regular_expressions() -> None:
    table, _ = hook_table([file({"hooks": {
        "PreToolUse": [command("exact", "read_file"), command("either", "grep|glob_files"),
                       command("regex", "^write"), command("all", ""),
                       {"hooks": [{"type": "command", "command": "no-matcher"}]}],
        "SessionStart": [command("on-resume", "resume")],
        "Stop": [command("stop", "anything: Stop has nothing to match")],
    }})])

    def ran(event: str, value: str | None) -> list[str]:
        return [c.command for c in table.commands_for(event, value)]

    assert ran("PreToolUse", "read_file") == ["exact", "all", "no-matcher"]
    assert ran("PreToolUse", "read_files") == ["all", "no-matcher"]  # names match exactly
    assert ran("PreToolUse", "glob_files") == ["either", "all", "no-matcher"]
    assert ran("PreToolUse", "write_file") == ["regex", "all", "no-matcher"]
    assert ran("SessionStart", "startup") == []
    assert ran("SessionStart", "resume") == ["on-resume"]
    assert ran("Stop", None) == ["stop"]


def test_a_bad_entry_is_one_line_naming_the_file_and_the_field_and_the_rest_is_used() -> None:
    table, problems = hook_table([file({"hooks": {
        "PreToolUse": [
            command("good", "run_bash", timeout=5),
            command("late", "run_bash", timeout=-1),
            command("", "run_bash"),
            command("x", "(unclosed"),
            {"matcher": 3, "hooks": []},
            {"matcher": "run_bash", "hooks": [{"type": "prompt", "prompt": "judge it"}]},
            "not an object",
        ],
        "Notification": [command("n")],
        "Stop": {"not": "a list"},
    }}), file({"hooks": ["a list"]}, "project")])
    assert [c.command for c in table.commands_for("PreToolUse", "run_bash")] == ["good"]
    assert table.commands_for("PreToolUse", "run_bash")[0].timeout == 5
    assert problems == [
        "/user/settings.json: hooks.PreToolUse[1].hooks[0].timeout: must be a positive number "
        "of seconds, not -1; left out",
        "/user/settings.json: hooks.PreToolUse[2].hooks[0].command: must be a command line (a "
        "non-empty string); left out",
        "/user/settings.json: hooks.PreToolUse[3].matcher: not a regular expression (missing ), "
        "unterminated subpattern at position 0); the entry is left out",
        "/user/settings.json: hooks.PreToolUse[4].matcher: must be a string; the entry is left "
        "out",
        "/user/settings.json: hooks.PreToolUse[5].hooks[0].type: only \"command\" hooks run "
        "here, not 'prompt'; left out",
        "/user/settings.json: hooks.PreToolUse[6]: must be an object with \"hooks\"; left out",
        "/user/settings.json: hooks.Notification: not an event the harness runs (SessionStart, "
        "SessionEnd, UserPromptSubmit, PreToolUse, PostToolUse, Stop, PreCompact); left out",
        "/user/settings.json: hooks.Stop: must be a list of {\"matcher\", \"hooks\"} objects; "
        "left out",
        "/project/settings.json: hooks: must be an object of event names; the file's hooks are "
        "left out",
    ]


def test_a_project_file_not_approved_gives_no_hooks() -> None:
    table, problems = hook_table([file({"hooks": {"Stop": [command("x")]}}, "project",
                                       approved=False)])
    assert not table and problems == []


def test_default_timeout_is_sixty_seconds() -> None:
    table, _ = hook_table([file({"hooks": {"Stop": [command("x")]}})])
    assert table.commands_for("Stop")[0].timeout == 60.0


# -- answers ---------------------------------------------------------------------------------

def ran(code: int | None, stdout: str = "", stderr: str = "", **more: Any) -> Ran:
    return Ran(HookCommand("cmd"), code, stdout, stderr, **more)


def test_exit_2_blocks_what_can_be_blocked_and_is_shown_otherwise() -> None:
    for event in ("PreToolUse", "PostToolUse", "UserPromptSubmit", "Stop"):
        said = answer(event, ran(2, stderr="no rm -rf here\n"))
        assert (said.outcome, said.feedback, said.blocks) == ("blocked", "no rm -rf here", True)
    for event in ("SessionStart", "SessionEnd", "PreCompact"):
        said = answer(event, ran(2, stderr="cannot block"))
        assert (said.outcome, said.blocks) == ("failed", False)


def test_other_exit_codes_timeouts_and_failures_to_start_are_ignored() -> None:
    assert answer("PreToolUse", ran(1, stderr="oops")).outcome == "failed"
    assert not answer("PreToolUse", ran(1, stderr="oops")).blocks
    assert answer("PreToolUse", ran(None, timed_out=True)).outcome == "timed_out"
    assert answer("PreToolUse", ran(None, error="Cannot start bash")).outcome == "error"


def test_plain_stdout_is_context_for_session_start_and_prompts_only() -> None:
    assert answer("SessionStart", ran(0, "branch: main\n")).context == "branch: main"
    assert answer("UserPromptSubmit", ran(0, "today is Monday")).context == "today is Monday"
    assert answer("PreToolUse", ran(0, "chatter")).context == ""
    assert not answer("PreToolUse", ran(0, "chatter")).worth_telling


def test_the_json_answer_in_claude_codes_fields() -> None:
    deny = answer("PreToolUse", ran(0, '{"hookSpecificOutput": {"hookEventName": "PreToolUse",'
                                        ' "permissionDecision": "deny", '
                                        '"permissionDecisionReason": "not on main"}}'))
    assert (deny.decision, deny.feedback, deny.blocks) == ("deny", "not on main", True)
    allow = answer("PreToolUse", ran(0, '{"hookSpecificOutput": {"permissionDecision": '
                                        '"allow", "updatedInput": {"command": "ls"}}}'))
    assert (allow.decision, allow.updated_input, allow.blocks) == ("allow", {"command": "ls"},
                                                                   False)
    assert answer("PreToolUse", ran(0, '{"decision": "approve"}')).decision == "allow"
    block = answer("Stop", ran(0, '{"decision": "block", "reason": "tests fail"}'))
    assert (block.outcome, block.feedback) == ("blocked", "tests fail")
    stop = answer("PostToolUse", ran(0, '{"continue": false, "stopReason": "enough", '
                                        '"systemMessage": "bye"}'))
    assert (stop.stop, stop.message, stop.blocks) == ("enough", "bye", False)
    context = answer("PostToolUse", ran(0, '{"hookSpecificOutput": {"additionalContext": '
                                           '"lint: 2 warnings"}}'))
    assert context.context == "lint: 2 warnings"
    bad = answer("PreToolUse", ran(0, '{"decision": 7, "hookSpecificOutput": '
                                      '{"permissionDecision": "maybe", "updatedInput": []}}'))
    assert bad.decision is None and bad.updated_input is None and len(bad.problems) == 3
    assert answer("UserPromptSubmit", ran(0, "{not json")).context == "{not json"
