"""Restoring workspace snapshots in real tmp projects: exactly the files of the chosen point
(shell commands' changes included), hand edits flagged first, undo, caps and .gitignore
respected, nothing written outside the project, and kill -9 in the middle of a snapshot or a
restore (done or not started, and says which)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.core.errors import UsageError
from actors.workspace import Limits, Workspace, open_objects, settle
from actors.workspace._crashpoints import ENV
from actors.workspace._diff import Trees
from tests.support.children import read_line, rest_of
from tests.support.project_files import exact, listing, restore
from tests.support.strict import unavailable

REPO = Path(__file__).resolve().parents[2]


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
        [sys.executable, "-m", "tests.support.programs.workspace_child", *args],
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
        [sys.executable, "-m", "tests.support.programs.workspace_child", "rewind", str(project),
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


def test_permissions_come_back_and_never_setuid(project: Path, memory: Path) -> None:
    """A 0600 key and a 0700 directory come back as they were; a read-only directory is
    made read-only after what goes in it; setuid and setgid are never kept."""
    _bash(project, "mkdir -p private ro; echo secret > private/key; chmod 600 private/key; "
                   "chmod 700 private; echo r > ro/r.txt; chmod 555 ro; echo s > tool; "
                   "chmod 4755 tool")
    workspace = _workspace(project, memory)
    target = workspace.snapshot()
    kept = exact(project)
    assert kept["private/key"] == (b"secret\n", 0o600) and kept["private"] == ("dir", 0o700)
    _bash(project, "chmod 755 ro; rm -r private ro; echo other > tool; chmod 644 tool")
    _restore(workspace, target.root)
    now = exact(project)
    assert now["private/key"] == (b"secret\n", 0o600)
    assert now["private"] == ("dir", 0o700)
    assert now["ro"] == ("dir", 0o555) and now["ro/r.txt"] == kept["ro/r.txt"]
    assert now["tool"] == (b"s\n", 0o755)  # the setuid bit was not kept
    # Only the permissions changed: a restore puts them back too.
    _bash(project, "chmod 644 private/key; chmod 755 private")
    workspace.snapshot()
    _restore(workspace, target.root)
    assert exact(project)["private/key"] == (b"secret\n", 0o600)
    assert exact(project)["private"] == ("dir", 0o700)
    os.chmod(project / "ro", 0o755)  # so that the tmp directory can be removed


def _bulk(root: Path, files: int, start: int = 0, ignored: int = 0) -> None:
    bulk = root / "bulk"
    (bulk / "deep").mkdir(parents=True, exist_ok=True)
    for i in range(start, start + files):
        (bulk / f"b{i:03}.txt").write_text(f"{i}\n")
    for i in range(ignored):
        (bulk / f"i{i:03}.log").write_text("log\n")


def test_the_entry_cap_counts_what_is_kept_not_what_is_ignored(tmp_path: Path,
                                                                memory: Path) -> None:
    root = tmp_path / "capped"
    _bulk(root, 10, ignored=50)
    (root / ".gitignore").write_text("*.log\n")
    (root / "bulk" / "deep" / "keep.txt").write_text("keep\n")
    workspace = _workspace(root, memory, max_entries=20)  # 13 kept, 63 listed
    snap = workspace.snapshot()
    assert snap.unscanned == ()
    assert "bulk/deep/keep.txt" in dict(Trees(workspace.objects).files(snap.root))
    _bulk(root, 10, start=10)  # 23 kept: past the cap, and said
    assert workspace.snapshot().unscanned == ("bulk/deep",)


def test_directories_either_snapshot_did_not_look_in_are_never_touched(
    tmp_path: Path, memory: Path
) -> None:
    root = tmp_path / "capped"
    _bulk(root, 10)
    (root / "bulk" / "deep" / "keep.txt").write_text("as the target has it\n")
    workspace = _workspace(root, memory, max_entries=20)
    target = workspace.snapshot()  # below the cap: bulk/deep was looked in
    _bulk(root, 10, start=10)  # past it now: bulk/deep is not looked in
    (root / "bulk" / "deep" / "keep.txt").write_text("edited by hand since\n")
    (root / "bulk" / "deep" / "new.txt").write_text("made by hand since\n")
    capped = workspace.snapshot()
    assert capped.unscanned == ("bulk/deep",)
    plan = workspace.plan_restore(target.root)
    assert [a.path for a in plan.left_alone] == ["bulk/deep"]
    assert "nothing in it is touched" in plan.left_alone[0].reason
    restore(workspace, plan)
    now = exact(root)
    assert now["bulk/deep/keep.txt"][0] == b"edited by hand since\n"  # type: ignore[index]
    assert now["bulk/deep/new.txt"][0] == b"made by hand since\n"  # type: ignore[index]
    assert "bulk/b015.txt" not in now  # what both snapshots saw is restored
    # The other way: the target did not look in it, the files as they are did.
    before = exact(root)
    plan = workspace.plan_restore(capped.root)
    assert [a.path for a in plan.left_alone] == ["bulk/deep"]
    assert "that snapshot did not look in this directory" in plan.left_alone[0].reason
    restore(workspace, plan)
    now = exact(root)
    assert now["bulk/deep/keep.txt"] == before["bulk/deep/keep.txt"]  # never deleted
    assert now["bulk/deep/new.txt"] == before["bulk/deep/new.txt"]
    assert "bulk/b015.txt" in now


@pytest.fixture
def in_memory() -> Iterator[Path]:
    """A directory on a tmpfs (``/dev/shm``): 200,000 files are made there in seconds."""
    if not os.path.isdir("/dev/shm") or not os.access("/dev/shm", os.W_OK):
        unavailable("no writable tmpfs at /dev/shm")
    root = Path(tempfile.mkdtemp(dir="/dev/shm", prefix="harness-test-"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.slow
def test_a_200000_file_project_is_rewound_without_touching_what_was_not_looked_in(
    in_memory: Path, memory: Path
) -> None:
    """The default cap (200,000 kept entries): the project passes it between the target and
    now, and the directory past it keeps its edits; a kept subtree is rewound."""
    root = in_memory / "big"
    bulk, src = root / "bulk", root / "src"
    for directory in (bulk / "late", src):
        directory.mkdir(parents=True)
    past = time.time() - 3600  # not racily recent: read once, then known by their stat
    fd = os.open(bulk, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i in range(199_990):  # empty files: fast to make and to read
            os.close(os.open(f"f{i}", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
            os.utime(f"f{i}", (past, past), dir_fd=fd)
    finally:
        os.close(fd)
    (bulk / "late" / "notes.txt").write_text("as the target has it\n")
    (src / "a.py").write_text("print('as the target has it')\n")
    workspace = _workspace(root, memory)
    target = workspace.snapshot()
    assert target.unscanned == ()  # 199,997 kept entries
    for i in range(20):
        (bulk / f"g{i}").write_text("")
    (bulk / "late" / "notes.txt").write_text("edited by hand since\n")
    (src / "a.py").write_text("print('changed since')\n")
    assert workspace.snapshot().unscanned == ("bulk/late",)
    restore(workspace, workspace.plan_restore(target.root))
    assert (bulk / "late" / "notes.txt").read_text() == "edited by hand since\n"
    assert (src / "a.py").read_text() == "print('as the target has it')\n"
    assert not (bulk / "g0").exists()


def test_a_journal_an_older_harness_left_puts_back_what_it_wrote(
    project: Path, memory: Path
) -> None:
    """Its restores wrote files before they were recorded: one cut short before its record
    is put back (only what is still as it left it), as that harness would have."""
    workspace = _workspace(project, memory)
    target = workspace.snapshot()
    _bash(project, "echo two > README; echo two > docs/d.md; echo n > new.txt")
    undo = workspace.snapshot()
    before = exact(project)
    _bash(project, "echo readme > README; echo d > docs/d.md")  # half of its writes
    (project / "new.txt").write_text("by hand after it\n")
    workspace.journal.path.write_text(json.dumps({
        "version": 1, "target": target.root.hex(), "undo": undo.root.hex(),
        "project": workspace.project, "session": "s1", "label": "to message 1",
        "touched": [], "id": "older", "started_at": 0.0}))
    said, left = settle(workspace)
    assert left is None and said is not None
    assert "interrupted before it was recorded; what it wrote was put back (2 paths)" in said
    assert exact(project) == {**before, "new.txt": exact(project)["new.txt"]}
    assert (project / "new.txt").read_text() == "by hand after it\n"
    assert workspace.journal.pending() is None
