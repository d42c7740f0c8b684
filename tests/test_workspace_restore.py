"""Restoring workspace snapshots in real tmp projects: exactly the files of the chosen point
(shell commands' changes included), hand edits flagged first, undo, caps and .gitignore
respected, nothing written outside the project, and kill -9 in the middle of a snapshot or a
restore (done or not started, and says which)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from actors.core.errors import UsageError
from actors.workspace import Limits, Workspace, open_objects
from actors.workspace._crashpoints import ENV
from actors.workspace._diff import Trees
from tests.children import read_line, rest_of
from tests.project_files import exact, listing, restore

REPO = Path(__file__).resolve().parent.parent


def _bash(project: Path, command: str) -> None:
    subprocess.run(["bash", "-c", command], cwd=project, check=True, timeout=30)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    _bash(root, "mkdir -p src/pkg docs; printf 'one\\ntwo\\n' > src/pkg/a.py; "
                "echo readme > README; echo run > run.sh; chmod +x run.sh; "
                "ln -s README link; echo d > docs/d.md")
    return root


def _workspace(project: Path, memory: Path, **limits: int) -> Workspace:
    return Workspace(project, memory, open_objects(memory), limits=Limits(**limits))


def _restore(workspace: Workspace, target: bytes, since: bytes | None = None) -> None:
    plan = workspace.plan_restore(target, since=since)
    restore(workspace, plan, since=since)


def test_restore_brings_back_exactly_the_files_shell_commands_changed(
    project: Path, memory: Path
) -> None:
    workspace = _workspace(project, memory)
    before = listing(project)
    target = workspace.snapshot()
    _bash(project, "echo three >> src/pkg/a.py; rm -r docs; mkdir -p build/x; "
                   "echo o > build/x/out.txt; rm link; ln -s src link; chmod -x run.sh; "
                   "mv README README.md")
    workspace.snapshot()
    _restore(workspace, target.root)
    assert listing(project) == before
    assert workspace.snapshot().root == target.root


def test_a_rewind_can_be_undone(project: Path, memory: Path) -> None:
    workspace = _workspace(project, memory)
    target = workspace.snapshot()
    _bash(project, "echo changed > README; rm run.sh; echo new > new.txt")
    after = listing(project)
    plan = workspace.plan_restore(target.root)
    done = restore(workspace, plan)
    assert listing(project) != after
    _restore(workspace, done.undo.root)  # the files as they were just before the rewind
    assert listing(project) == after


def test_the_plan_shows_a_diffstat_and_flags_hand_edits(project: Path, memory: Path) -> None:
    workspace = _workspace(project, memory)
    target = workspace.snapshot()
    _bash(project, "echo three >> src/pkg/a.py; echo tool > tool.txt")
    latest = workspace.snapshot()  # what the session last saw
    _bash(project, "echo by hand >> README; echo more >> tool.txt")  # the user, in an editor
    plan = workspace.plan_restore(target.root, since=latest.root)
    stats = {s.change.path: (s.change.status, s.added, s.removed) for s in plan.stats}
    assert stats == {"README": ("modified", 0, 1), "src/pkg/a.py": ("modified", 0, 1),
                     "tool.txt": ("deleted", 0, 2)}
    assert plan.hand_edited == {"README", "tool.txt"}
    assert listing(project)["README"] == (b"readme\nby hand\n", False)  # nothing written yet


def test_a_plan_gone_stale_restores_nothing(project: Path, memory: Path) -> None:
    workspace = _workspace(project, memory)
    target = workspace.snapshot()
    (project / "README").write_text("changed\n")
    plan = workspace.plan_restore(target.root)
    (project / "another.txt").write_text("written while the user was reading the plan\n")
    now = listing(project)
    with pytest.raises(UsageError, match="changed while the rewind was being confirmed"):
        workspace.begin_restore(plan)
    assert listing(project) == now
    assert workspace.journal.pending() is None


def test_ignored_and_kept_out_files_are_left_alone(project: Path, memory: Path) -> None:
    (project / ".gitignore").write_text("*.log\n")
    (project / "big.bin").write_bytes(b"x" * 5000)
    workspace = _workspace(project, memory, max_file_bytes=4000)
    target = workspace.snapshot()
    assert [k.path for k in target.kept_out] == ["big.bin"]
    _bash(project, "mkdir -p tmpdir; echo log > tmpdir/run.log; echo tool > tmpdir/t.txt; "
                   "echo l > top.log; printf 'y%.0s' {1..6000} > big.bin; echo new > big2.bin")
    plan = workspace.plan_restore(target.root)
    assert {a.path for a in plan.left_alone} == {"big.bin"}
    _restore(workspace, target.root)
    now = listing(project)
    assert now["big.bin"] == (b"y" * 6000, False)  # no copy was kept: never overwritten
    assert now["top.log"] == (b"l\n", False)  # ignored: never looked at, never removed
    assert now["tmpdir/run.log"] == (b"log\n", False)  # so its directory stays too
    assert "tmpdir/t.txt" not in now and "big2.bin" not in now


def test_a_restored_ignored_path_is_kept_first(project: Path, memory: Path) -> None:
    """A file the target has that .gitignore hides now is in the undo snapshot first."""
    workspace = _workspace(project, memory)
    (project / "notes.txt").write_text("old notes\n")
    target = workspace.snapshot()
    _bash(project, "echo '*.txt' > .gitignore; echo 'new notes' > notes.txt")
    plan = workspace.plan_restore(target.root)
    done = restore(workspace, plan)
    assert (project / "notes.txt").read_text() == "old notes\n"
    assert "notes.txt" in dict(Trees(workspace.objects).files(done.undo.root))
    _restore(workspace, done.undo.root)
    assert (project / "notes.txt").read_text() == "new notes\n"


def test_nothing_outside_the_project_is_written(tmp_path: Path, project: Path,
                                                memory: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a.py").write_text("outside\n")
    workspace = _workspace(project, memory)
    target = workspace.snapshot()
    # The agent replaced a directory with a link to a place outside, and a file with a link.
    _bash(project, f"rm -r src/pkg; ln -s {outside} src/pkg; rm README; "
                   f"ln -s {outside}/a.py README")
    outside_before = listing(outside)
    _restore(workspace, target.root)
    assert listing(outside) == outside_before
    assert (project / "src" / "pkg").is_dir() and not (project / "src" / "pkg").is_symlink()
    assert (project / "README").read_text() == "readme\n"
    assert not (project / "README").is_symlink()


def test_a_directory_that_cannot_become_a_file_again_is_left_alone_and_said(
    project: Path, memory: Path
) -> None:
    (project / ".gitignore").write_text("*.log\n")
    (project / "out").write_text("a file\n")
    workspace = _workspace(project, memory)
    target = workspace.snapshot()
    # `out` becomes a directory holding an ignored file: it cannot become a file again.
    _bash(project, "rm out; mkdir out; echo l > out/keep.log; echo t > out/t.txt; "
                   "echo changed > README; rm run.sh")
    plan = workspace.plan_restore(target.root)
    entry, fresh = workspace.begin_restore(plan)
    applied = workspace.apply_restore(entry, fresh.changes)
    workspace.end_restore(entry)
    assert applied.left == ["out"] and not applied.stopped
    now = listing(project)
    assert now["out/keep.log"] == (b"l\n", False)  # never lost
    assert "out/t.txt" not in now  # the rest of the rewind is done
    assert now["README"] == (b"readme\n", False) and "run.sh" in now
    assert workspace.journal.pending() is None


def _mark_message(workspace: Workspace, root: bytes, session: str = "s1") -> None:
    """What the keeper records when a user message is sent (message 1 of ``session``)."""
    workspace.objects.marks.add(session, "message", 1, root,
                                detail={"project": workspace.project})


@pytest.mark.slow
def test_a_restore_that_fails_half_way_puts_back_what_it_wrote(
    project: Path, memory: Path
) -> None:
    (project / "big.bin").write_bytes(os.urandom(600_000))
    _many_files(project)
    workspace = _workspace(project, memory)
    _mark_message(workspace, workspace.snapshot().root)
    _bash(project, "for f in many/*/*.txt; do echo version two > $f; done; "
                   "head -c 1000 /dev/urandom > big.bin; echo n > new.txt")
    workspace.snapshot()
    workspace.close()
    workspace.objects.close()
    before = exact(project)
    # No file may grow past 300 KB (as on a full disk): big.bin, written after many/ (by
    # path), cannot be; what was written before it goes back.
    with _child("rewind", str(project), str(memory), "s1", "1", "300000") as proc:
        said, err = proc.communicate(timeout=60)
    assert said.startswith("failed True: Restoring the project's files failed (File too "
                           "large"), said + err
    assert "what it had written was put back (" in said and "did not happen" in said
    assert exact(project) == before
    workspace = _workspace(project, memory)
    assert workspace.journal.pending() is None
    kinds = [(m.kind, "undoes" in m.detail) for m in workspace.objects.marks.of_session("s1")]
    assert kinds == [("message", False), ("rewind", False), ("rewind", True)]


def test_hard_links_keep_their_other_names(project: Path, memory: Path) -> None:
    workspace = _workspace(project, memory)
    target = workspace.snapshot()
    os.link(project / "README", project / "other-name")
    (project / "README").write_text("through both names\n")  # same inode
    _restore(workspace, target.root)
    assert (project / "README").read_text() == "readme\n"
    assert "other-name" not in listing(project)


# -- kill -9 --------------------------------------------------------------------------------


def _child(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.programs.workspace_child", *args],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _many_files(project: Path) -> None:
    for i in range(40):
        (project / "many" / f"d{i % 4}").mkdir(parents=True, exist_ok=True)
        (project / "many" / f"d{i % 4}" / f"f{i}.txt").write_text(f"version one {i}\n")


@pytest.mark.slow
def test_kill_9_during_a_restore_leaves_each_path_done_or_still_to_do(
    project: Path, memory: Path
) -> None:
    _many_files(project)
    workspace = _workspace(project, memory)
    _mark_message(workspace, workspace.snapshot().root)
    expected_target = exact(project)
    _bash(project, "for f in many/*/*.txt; do echo version two > $f; done; rm README; "
                   "echo n > new.txt")
    workspace.snapshot()
    workspace.close()
    workspace.objects.close()
    expected_undo = exact(project)
    env = {**os.environ, ENV: "restore#5"}
    with subprocess.Popen(
        [sys.executable, "-m", "tests.programs.workspace_child", "rewind", str(project),
         str(memory), "s1", "1"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=env,
    ) as proc:
        assert proc.stderr is not None
        assert read_line(proc.stderr) == "at point restore\n", rest_of(proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    half = exact(project)
    assert half not in (expected_undo, expected_target)  # really cut in the middle
    with _child("look", str(project), str(memory)) as proc:
        assert proc.stdout is not None
        found = json.loads(read_line(proc.stdout))
        rest_of(proc)
    assert found["recorded"] and found["changed"] == []
    assert len(found["done"]) == 5 and len(found["todo"]) == 40 + 2 - 5
    assert exact(project) == half  # looking writes nothing
    with _child("put-back", str(project), str(memory)) as proc:
        assert proc.stdout is not None
        assert read_line(proc.stdout) == "put back 5\n"
        rest_of(proc)
    assert exact(project) == expected_undo
    assert not any(name.startswith(".") and name.endswith(".tmp")
                   for name in os.listdir(project))  # no temporary file left behind
    with _child("look", str(project), str(memory)) as proc:
        assert proc.stdout is not None
        assert read_line(proc.stdout) == "null\n"  # over
        rest_of(proc)


@pytest.mark.slow
def test_kill_9_during_snapshots_leaves_the_store_consistent(
    project: Path, memory: Path
) -> None:
    _many_files(project)
    for round_ in range(4):
        with _child("snapshot", str(project), str(memory)) as proc:
            assert proc.stdout is not None
            for step in range(3 + round_):
                assert read_line(proc.stdout).startswith("snap "), rest_of(proc)
                (project / "many" / "d1" / f"f{step}.txt").write_text(f"round {round_} {step}\n")
                (project / f"new{round_}-{step}.txt").write_text("x" * (1000 * step))
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
    database = memory / "workspace" / "objects.sqlite3"
    with sqlite3.connect(database) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    with_cache = _workspace(project, memory)
    cached = with_cache.snapshot().root
    assert with_cache.has(cached)
    reached = with_cache.objects.reachable([cached])
    assert not with_cache.objects.missing(reached)
    with_cache.close()
    for name in os.listdir(memory / "workspace" / "cache"):
        os.unlink(memory / "workspace" / "cache" / name)
    fresh = _workspace(project, memory).snapshot()  # read every file again
    assert fresh.root == cached  # the cache a kill left behind named the right files
