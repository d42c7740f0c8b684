"""A rewind of the files cut short never costs the user's work: real ``harness`` processes, a
real project, real SIGKILL at every step of the rewind's protocol, real SIGINT and SIGTERM,
and writes in between by hand, by another session and by a run without snapshots.

A session of one turn rewrites the 30 files of a project; ``harness --rewind ID --to N
--files`` brings them back, and is cut at a crash point (``AGENT_HARNESS_TEST_PAUSE_AT``,
:mod:`actors.workspace._crashpoints`). The next commands must say what they find in one
line, finish it only where nothing changed since, refuse (print mode, headless) when
something did, and keep every write reversible (``--undo``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from actors.testing.scripted_server import Reply, ScriptedServer, ToolCall
from actors.workspace._crashpoints import ENV
from tests.support.clitools import REPO, harness, killed_at, stopped_at
from tests.support.project_files import exact, record_two_turns

pytestmark = pytest.mark.slow

FILES = 30


class Wide:
    """A session whose first turn rewrote every file of the project (and made one)."""

    def __init__(self, tmp_path: Path) -> None:
        self.memory = tmp_path / "memory"
        self.project = (tmp_path / "project").resolve()
        script = [
            Reply(tool_calls=[ToolCall("run_bash", {
                "command": "for f in f*.txt; do echo two > $f; done; echo new > made.txt"})]),
            Reply("Rewritten."),
            Reply("Nothing more."),
        ]
        files = {f"f{i:02}.txt": "one\n" for i in range(FILES)}
        recorded = record_two_turns(tmp_path, script, files, look=exact)
        self.first = recorded.store.user_messages(recorded.session_id)[0].number
        recorded.store.close()
        self.id = recorded.session_id
        self.start = recorded.start  # as they were when the first message was sent
        self.end = recorded.end

    def project_now(self) -> dict[str, object]:
        return exact(self.project)

    def run(self, *args: str, point: str = "") -> subprocess.CompletedProcess[str]:
        return harness(*args, memory_dir=self.memory, cwd=self.project,
                       env={ENV: point} if point else None)

    def rewind_args(self) -> list[str]:
        return ["--rewind", self.id, "--to", str(self.first), "--files"]

    def start_rewind(self, point: str) -> subprocess.Popen[str]:
        """``harness --rewind`` that stops at ``point``; returned once it is there."""
        return stopped_at(point, *self.rewind_args(), memory_dir=self.memory, cwd=self.project)

    def kill_at(self, point: str) -> None:
        killed_at(point, *self.rewind_args(), memory_dir=self.memory, cwd=self.project)


@pytest.fixture
def wide(tmp_path: Path) -> Wide:
    return Wide(tmp_path)


def _print_mode(wide: Wide, server: ScriptedServer, *more: str, session: str = ""
                ) -> subprocess.CompletedProcess[str]:
    resume = ["--resume", session] if session else []
    return wide.run("-p", "go on", *resume, "--base-url", server.base_url, "--mode",
                    "dangerouslySkipPermissions", *more)


def _files(listing: dict[str, object], names: list[str]) -> dict[str, object]:
    return {name: listing[name] for name in names}


@pytest.mark.parametrize("point", ["rewind-journaled", "rewind-recorded", "restore#1",
                                   "restore#17", "rewind-applied"])
def test_a_kill_at_any_step_is_said_in_one_line_and_finished_or_undone(
    wide: Wide, point: str
) -> None:
    wide.kill_at(point)
    half = wide.project_now()
    started = point != "rewind-journaled"  # recorded: the commit point was passed
    if point.startswith("restore"):
        assert half not in (wide.start, wide.end)  # cut in the middle
    # A dry run says what the next command would do, and changes nothing.
    result = wide.run(*wide.rewind_args(), "--dry-run")
    assert result.returncode == 0, result.stderr
    assert "was interrupted" in result.stdout and "Nothing was changed" in result.stdout
    assert wide.project_now() == half
    # The next command (here a turn in print mode) takes it up, says so in one line.
    with ScriptedServer([Reply("Fine.")]) as server:
        result = _print_mode(wide, server, session=wide.id)
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if "was interrupted" in line]
    assert len(lines) == 1, result.stderr
    if started:
        assert "it has been finished" in lines[0] and f"--rewind {wide.id} --undo" in lines[0]
        assert wide.project_now() == wide.start
        result = wide.run("--rewind", wide.id, "--undo")  # reversible: back to before it
        assert result.returncode == 0, result.stderr
        assert wide.project_now() == wide.end
    else:
        assert "before it started; nothing was changed" in lines[0]
        assert wide.project_now() == wide.end
        result = wide.run("--rewind", wide.id, "--undo")
        assert result.returncode == 2 and "no rewind of files to undo" in result.stderr


def test_what_changed_while_it_was_pending_is_never_overwritten(wide: Wide) -> None:
    names = [f"f{i:02}.txt" for i in range(FILES)]
    # Two other sessions are under way in the project, their commands waiting for `go`:
    # one with snapshots, one without. They write when the rewind has been cut.
    waiting = ("while [ ! -e go ]; do sleep 0.02; done; ")
    others = []
    for label, more, target in (("other", (), "f25.txt"),
                                ("nosnap", ("--no-snapshots",), "f26.txt")):
        server = ScriptedServer([
            Reply(tool_calls=[ToolCall("run_bash", {
                "command": f"{waiting}echo {label} > {label}.txt; echo {label} > {target}"})]),
            Reply("Written."),
        ])
        server.__enter__()
        env = {**os.environ, "AGENT_HARNESS_MEMORY_DIR": str(wide.memory),
               "PYTHONPATH": str(REPO)}
        proc = subprocess.Popen(
            [sys.executable, "-m", "repl", "-p", f"write {label}", "--base-url",
             server.base_url, "--mode", "dangerouslySkipPermissions", *more],
            cwd=wide.project, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        others.append((server, proc))
    while not all(server.requests for server, _proc in others):  # their commands run
        time.sleep(0.02)
    wide.kill_at("restore#10")  # made.txt removed, f00 to f08 back to "one", f09 on: "two"
    half = wide.project_now()
    assert "made.txt" not in half
    assert [half[n][0] for n in names[:9]] == [b"one\n"] * 9  # type: ignore[index]
    assert [half[n][0] for n in names[9:]] == [b"two\n"] * 21  # type: ignore[index]
    # By hand: a fix where the rewind had written, one where it had not, a new file.
    (wide.project / "f05.txt").write_text("fixed by hand\n")
    (wide.project / "f20.txt").write_text("also by hand\n")
    (wide.project / "hand.txt").write_text("new by hand\n")
    (wide.project / "go").write_text("")
    for server, proc in others:
        _out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        server.__exit__(None, None, None)
    between = wide.project_now()
    changed = ["f05.txt", "f20.txt", "f25.txt", "f26.txt"]
    # Headless commands and print mode refuse, in one line naming what ends it.
    result = wide.run(*wide.rewind_args())
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("harness: ")
    assert f"--rewind {wide.id} --finish" in result.stderr
    assert f"--rewind {wide.id} --undo" in result.stderr
    assert all(name in result.stderr for name in changed)
    with ScriptedServer([Reply("Never asked.")]) as server:
        refused = _print_mode(wide, server)
        assert refused.returncode == 2 and not server.requests
    assert "--finish" in refused.stderr and refused.stderr.count("\n") == 1
    assert wide.project_now() == between
    # --finish writes only what is still as the rewind found it, and says what it left.
    result = wide.run("--rewind", wide.id, "--finish")
    assert result.returncode == 0, result.stderr
    assert "leaving 4 files changed since as they are" in result.stdout
    done = wide.project_now()
    for name in names:
        if name not in changed:
            assert done[name] == wide.start[name], name
    assert _files(done, changed) == _files(between, changed)  # every change kept
    for name in ("hand.txt", "other.txt", "nosnap.txt", "go"):
        assert done[name] == between[name]  # nothing it did not plan is touched
    assert "made.txt" not in done
    # Every write is reversible: --undo goes back to before the rewind, and its own undo
    # point brings the finished state back, hand edits included.
    result = wide.run("--rewind", wide.id, "--undo")
    assert result.returncode == 0, result.stderr
    assert wide.project_now() != done
    result = wide.run("--rewind", wide.id, "--undo")
    assert result.returncode == 0, result.stderr
    assert wide.project_now() == done


def test_a_pending_rewind_can_be_put_back_leaving_what_changed_since(wide: Wide) -> None:
    wide.kill_at("restore#10")
    (wide.project / "f03.txt").write_text("fixed by hand\n")  # written by it, then changed
    result = wide.run("--rewind", wide.id, "--undo", "--dry-run")
    assert result.returncode == 0 and "--undo would put back the 9 paths" in result.stdout
    result = wide.run("--rewind", wide.id, "--undo")
    assert result.returncode == 0, result.stderr
    assert "what it wrote was put back (9 paths)" in result.stdout
    now = wide.project_now()
    assert now == {**wide.end, "f03.txt": (b"fixed by hand\n", now["f03.txt"][1])}  # type: ignore[index]
    result = wide.run("--rewind", wide.id, "--to", str(wide.first), "--files")
    assert result.returncode == 0, result.stderr  # nothing pending any more


@pytest.mark.parametrize("signum,status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_finishes_the_file_under_way_and_stops_with_one_line(
    wide: Wide, signum: int, status: int
) -> None:
    with wide.start_rewind("restore#7~") as proc:
        proc.send_signal(signum)
        _out, err = proc.communicate(timeout=30)
    assert proc.returncode == status, err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("harness: Stopped after 7 of ")
    assert f"--rewind {wide.id} --finish" in lines[0]
    assert f"--rewind {wide.id} --undo" in lines[0]
    now = wide.project_now()  # the 7 paths: made.txt removed, then 6 files written
    assert "made.txt" not in now
    assert sum(now[f"f{i:02}.txt"] == wide.start[f"f{i:02}.txt"] for i in range(FILES)) == 6
    result = wide.run("--rewind", wide.id, "--finish")  # the command it named
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("\n") == 1 and "it has been finished" in result.stdout
    assert wide.project_now() == wide.start
