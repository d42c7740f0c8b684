"""The settings files read as hostile input (actors/core/settings_files.py) and a project's file
used only once the user approved its content (actors/core/project_trust.py): real files."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from actors.core.project_trust import approvals_path, approve, is_approved
from actors.core.settings_files import (
    MAX_BYTES,
    load_json_file,
    project_settings_path,
    read_settings,
    user_settings_path,
)

HOOKS = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "true"}]}]}}


def write(path: Path, data: object | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_the_files_are_beside_the_memory_directory_and_in_the_project(tmp_path: Path) -> None:
    assert user_settings_path(tmp_path / "home" / "memory") == tmp_path / "home/settings.json"
    assert project_settings_path(tmp_path / "p") == tmp_path / "p/.agent-harness/settings.json"
    assert user_settings_path(Path("~/.agent-harness/memory")) == (
        Path.home() / ".agent-harness/settings.json")


@pytest.mark.parametrize(("content", "problem"), [
    ("{", "is not valid JSON (line 1, column 2: Expecting property name enclosed in double "
          "quotes)"),
    ("[1, 2]", "holds list, not a JSON object"),
    ('{"a": NaN}', "cannot be decoded (NaN is not valid JSON)"),
    ('{"a": ' + "9" * 5000 + "}", "cannot be decoded (Exceeds the limit (4300 digits) for "
                                  "integer string conversion: value has 5000 digits; use "
                                  "sys.set_int_max_str_digits() to increase the limit)"),
    ("[" * 100_000, "cannot be decoded (nests too deep)"),
    (b"\xff\xfe".decode("latin-1"), "is not valid JSON (line 1, column 1: Expecting value)"),
])
def test_a_bad_file_is_one_line_and_nothing_of_it_is_used(
    tmp_path: Path, content: str, problem: str
) -> None:
    path = write(tmp_path / "settings.json", content)
    loaded = load_json_file(path)
    assert (loaded.exists, dict(loaded.data), loaded.problem) == (True, {}, problem)


def test_not_utf8_too_large_a_directory_and_a_fifo_are_refused(tmp_path: Path) -> None:
    (tmp_path / "latin1.json").write_bytes(b'{"a": "\xe9"}')
    assert load_json_file(tmp_path / "latin1.json").problem == "is not UTF-8 text"
    write(tmp_path / "big.json", '{"a": "' + "x" * MAX_BYTES + '"}')
    assert load_json_file(tmp_path / "big.json").problem == "is larger than 1024 KB"
    (tmp_path / "dir.json").mkdir()
    assert load_json_file(tmp_path / "dir.json").problem == "is a directory"
    os.mkfifo(tmp_path / "fifo.json")  # opened without blocking, never read
    assert load_json_file(tmp_path / "fifo.json").problem == "is not a regular file"
    assert load_json_file(tmp_path / "missing.json").exists is False
    assert load_json_file(tmp_path / "latin1.json" / "below").exists is False


def test_a_project_file_is_used_once_its_content_is_approved(tmp_path: Path) -> None:
    memory, project = tmp_path / "home" / "memory", tmp_path / "project"
    write(user_settings_path(memory), {"hooks": {}})
    path = write(project_settings_path(project), HOOKS)
    user, mine = read_settings(memory, project)
    assert (user.scope, user.approved, dict(user.data)) == ("user", True, {"hooks": {}})
    assert (mine.scope, mine.approved, dict(mine.data)) == ("project", False, {})
    assert mine.waiting_for_approval and mine.runs_commands

    assert mine.loaded.digest is not None
    approve(memory, path, mine.loaded.digest)
    assert stat.S_IMODE(approvals_path(memory).stat().st_mode) == 0o600
    assert stat.S_IMODE(memory.stat().st_mode) == 0o700
    _, mine = read_settings(memory, project)
    assert mine.approved and dict(mine.data) == HOOKS and not mine.waiting_for_approval

    write(path, {**HOOKS, "changed": True})  # a pull, a checkout, a model's edit: asked again
    _, mine = read_settings(memory, project)
    assert not mine.approved and dict(mine.data) == {} and mine.waiting_for_approval


def test_approvals_are_kept_per_file_and_a_damaged_record_approves_nothing(
    tmp_path: Path,
) -> None:
    memory = tmp_path / "memory"
    approve(memory, tmp_path / "a" / "settings.json", "1" * 64)
    approve(memory, tmp_path / "b" / "settings.json", "2" * 64)
    assert is_approved(memory, tmp_path / "a" / "settings.json", "1" * 64)
    assert is_approved(memory, tmp_path / "b" / "settings.json", "2" * 64)
    assert not is_approved(memory, tmp_path / "b" / "settings.json", "1" * 64)
    approvals_path(memory).write_text('{"files": [')
    assert not is_approved(memory, tmp_path / "a" / "settings.json", "1" * 64)
    approve(memory, tmp_path / "a" / "settings.json", "1" * 64)  # replaces the damaged file
    assert is_approved(memory, tmp_path / "a" / "settings.json", "1" * 64)


def test_a_project_without_commands_waits_for_nothing(tmp_path: Path) -> None:
    memory, project = tmp_path / "memory", tmp_path / "project"
    write(project_settings_path(project), {"model": "x", "hooks": {}})
    _, mine = read_settings(memory, project)
    assert not mine.waiting_for_approval


def test_the_project_file_that_is_the_users_own_counts_once(tmp_path: Path) -> None:
    home = tmp_path / "user"  # the harness started in $HOME: the two paths are one file
    write(home / ".agent-harness" / "settings.json", HOOKS)
    files = read_settings(home / ".agent-harness" / "memory", home)
    assert [(f.scope, f.approved) for f in files] == [("user", True)]
