"""Taking workspace snapshots of real tmp projects: what changed is all that is read, shell
commands' changes are seen, content is stored once, caps and the harness's state respected."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from actors.workspace import Limits, Workspace, open_objects
from actors.workspace._diff import Trees
from actors.workspace._housekeeping import collect, due
from actors.workspace._tree import OMITTED
from tests.support.project_files import restore
from tests.support.stores import Stores


def _old(path: Path) -> None:
    """Give ``path`` and everything below it a time well in the past (not racily clean)."""
    past = time.time() - 3600
    for top, dirs, files in os.walk(path):
        for name in [*dirs, *files]:
            os.utime(os.path.join(top, name), (past, past), follow_symlinks=False)


def _project(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def _bash(project: Path, command: str) -> None:
    subprocess.run(["bash", "-c", command], cwd=project, check=True, timeout=30)


def _workspace(project: Path, memory: Path, **limits: int) -> Workspace:
    return Workspace(project, memory, open_objects(memory), limits=Limits(**limits))


def _paths(workspace: Workspace, root: bytes) -> dict[str, str]:
    return {p: e.kind for p, e in Trees(workspace.objects).files(root)}


def test_unchanged_tree_reads_nothing_and_is_the_same_snapshot(
    tmp_path: Path, memory: Path
) -> None:
    project = _project(tmp_path / "p", {f"d{i}/f{j}.txt": f"{i} {j}\n"
                                         for i in range(10) for j in range(10)})
    _old(project)
    workspace = _workspace(project, memory)
    first = workspace.snapshot()
    assert first.files == 100 and first.new_objects == 100 + 11  # blobs and trees
    again = workspace.snapshot()
    assert again.root == first.root
    assert (again.new_objects, again.changed_dirs) == (0, 0)
    workspace.close()
    reopened = _workspace(project, memory)  # the stat cache was kept on disk
    third = reopened.snapshot()
    assert (third.root, third.changed_dirs) == (first.root, 0)


def test_one_changed_file_reads_only_its_directory(tmp_path: Path, memory: Path) -> None:
    project = _project(tmp_path / "p", {f"d{i}/f{j}.txt": f"{i} {j}\n"
                                         for i in range(10) for j in range(10)})
    _old(project)
    workspace = _workspace(project, memory)
    first = workspace.snapshot()
    (project / "d3" / "f4.txt").write_text("changed\n")
    second = workspace.snapshot()
    assert second.changed_dirs == 2  # d3 and the root
    assert second.new_objects == 3  # the blob, d3's tree, the root
    assert [(c.path, c.status) for c in workspace.diff(first.root, second.root)] == [
        ("d3/f4.txt", "modified")
    ]


def test_what_a_shell_command_created_changed_and_deleted(tmp_path: Path, memory: Path) -> None:
    project = _project(tmp_path / "p", {"a.txt": "a\n", "gone/b.txt": "b\n", "keep.txt": "k\n"})
    workspace = _workspace(project, memory)
    before = workspace.snapshot()
    _bash(project, "echo more >> a.txt; rm -r gone; mkdir -p new/deep; "
                   "printf 'x\\ny\\n' > new/deep/c.txt; ln -s keep.txt alias; "
                   "chmod +x keep.txt")
    after = workspace.snapshot()
    changes = {(c.path, c.status) for c in workspace.diff(before.root, after.root)}
    assert changes == {
        ("a.txt", "modified"), ("gone", "deleted"), ("gone/b.txt", "deleted"),
        ("new", "added"), ("new/deep", "added"), ("new/deep/c.txt", "added"),
        ("alias", "added"), ("keep.txt", "modified"),
    }
    kinds = _paths(workspace, after.root)
    assert kinds["alias"] == "l" and kinds["keep.txt"] == "x"
    stats = {s.change.path: (s.added, s.removed)
             for s in workspace.diffstat(workspace.diff(before.root, after.root))}
    assert stats["a.txt"] == (1, 0) and stats["new/deep/c.txt"] == (2, 0)
    assert stats["gone/b.txt"] == (0, 1) and stats["alias"] == (None, None)
    text = workspace.unified(next(c for c in workspace.diff(before.root, after.root)
                                  if c.path == "a.txt"))
    assert "+more" in text and text.startswith("--- a/a.txt")


def test_a_file_changed_within_the_same_second_is_still_seen(
    tmp_path: Path, memory: Path
) -> None:
    """Racily clean files: a rewrite that keeps size and mtime is read again next time."""
    project = _project(tmp_path / "p", {"a.txt": "aaaa"})
    workspace = _workspace(project, memory)
    first = workspace.snapshot()
    stat = os.stat(project / "a.txt")
    (project / "a.txt").write_text("bbbb")
    os.utime(project / "a.txt", ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same mtime
    second = workspace.snapshot()
    assert second.root != first.root


def test_content_is_stored_once_across_projects_and_snapshots(
    tmp_path: Path, memory: Path
) -> None:
    shared = {f"f{i}.txt": ("line\n" * 200) + str(i) for i in range(20)}
    one = _workspace(_project(tmp_path / "one", shared), memory)
    two = _workspace(_project(tmp_path / "two", shared), memory)
    first = one.snapshot()
    second = two.snapshot()
    assert first.root == second.root  # same files, same snapshot
    assert second.new_objects == 0
    usage = one.objects.usage()
    assert usage.objects == 21
    assert usage.stored < usage.size  # compressed


def test_gitignore_is_respected(tmp_path: Path, memory: Path) -> None:
    project = _project(tmp_path / "p", {".gitignore": "*.log\nnode_modules/\n",
                                        "a.txt": "a", "x.log": "log",
                                        "node_modules/m/index.js": "js"})
    workspace = _workspace(project, memory)
    assert set(_paths(workspace, workspace.snapshot().root)) == {".gitignore", "a.txt"}


def test_size_caps_keep_files_out_and_say_so(tmp_path: Path, memory: Path) -> None:
    project = _project(tmp_path / "p", {"small.txt": "s" * 10, "mid.bin": "m" * 3000,
                                        "big.bin": "b" * 20_000})
    workspace = _workspace(project, memory, max_file_bytes=10_000, max_project_bytes=2_000)
    snap = workspace.snapshot()
    kept_out = {k.path: k.reason for k in snap.kept_out}
    assert set(kept_out) == {"big.bin", "mid.bin"}
    assert "cap per file" in kept_out["big.bin"]
    assert "project's size cap" in kept_out["mid.bin"]
    kinds = _paths(workspace, snap.root)
    assert kinds == {"small.txt": "f", "big.bin": OMITTED, "mid.bin": OMITTED}
    assert snap.size == 10
    assert workspace.objects.usage().size < 3000  # neither big file's bytes were stored


def test_the_git_directory_and_the_harness_state_are_never_read(
    tmp_path: Path, memory: Path
) -> None:
    project = _project(tmp_path / "p", {"a.txt": "a", ".git/config": "[core]\n"})
    inner = project / ".agent-harness"
    inner.mkdir(mode=0o700)
    (inner / "sessions.sqlite3").write_text("secret")
    os.link(inner / "sessions.sqlite3", project / "hardlink")
    workspace = Workspace(project, inner, open_objects(inner))  # memory dir inside the project
    snap = workspace.snapshot()
    kinds = _paths(workspace, snap.root)
    assert set(kinds) == {"a.txt", "hardlink"}
    assert kinds["hardlink"] == OMITTED  # a name for the harness's own file: not read
    assert b"secret" not in b"".join(
        workspace.objects.load_many([e.oid for _p, e in Trees(workspace.objects).files(snap.root)
                                     if e.is_content]).values()
    )


def test_symlinks_are_recorded_not_followed(tmp_path: Path, memory: Path) -> None:
    outside = _project(tmp_path / "outside", {"secret.txt": "outside"})
    project = _project(tmp_path / "p", {"a.txt": "a"})
    os.symlink(outside, project / "out")
    os.symlink(outside / "secret.txt", project / "s.txt")
    workspace = _workspace(project, memory)
    snap = workspace.snapshot()
    kinds = _paths(workspace, snap.root)
    assert kinds == {"a.txt": "f", "out": "l", "s.txt": "l"}
    target = Trees(workspace.objects).entry(snap.root, "s.txt")
    assert target is not None
    assert workspace.objects.load(target.oid) == os.fsencode(outside / "secret.txt")


def test_a_collection_keeps_what_roots_reach_and_the_cache_survives_it(
    tmp_path: Path, memory: Path
) -> None:
    project = _project(tmp_path / "p", {"a.txt": "first", "b.txt": "b"})
    workspace = _workspace(project, memory)
    first = workspace.snapshot()
    (project / "a.txt").write_text("second")
    second = workspace.snapshot()
    collected = workspace.objects.collect([second.root], grace_seconds=-10)
    assert collected.deleted == 2  # the first root and its a.txt blob
    assert not workspace.has(first.root) and workspace.has(second.root)
    (project / "c.txt").write_text("c")  # the cache names b.txt's blob: still there
    third = workspace.snapshot()
    assert workspace.objects.missing(
        [e.oid for _p, e in Trees(workspace.objects).files(third.root)]) == set()
    nothing = workspace.objects.collect([], grace_seconds=3600)
    assert nothing.deleted == 0  # just used: within the grace period


def test_objects_and_marks_live_beside_the_sessions(tmp_path: Path, stores: Stores) -> None:
    """SQLite: a file of its own in the memory dir; PostgreSQL: tables in the session
    database. Snapshot, mark, restore and collect the same way on both."""
    memory = tmp_path / "memory"
    store = stores.open(memory)
    project = _project(tmp_path / "p", {"a.txt": "one\n", "d/b.txt": "b\n"})
    objects = open_objects(memory, store)
    assert (objects.db.dialect == "postgres") == stores.is_pg
    workspace = Workspace(project, memory, objects, protected=[store.memory_dir])
    first = workspace.snapshot()
    objects.marks.add("s1", "message", 2, first.root)
    _bash(project, "echo two >> a.txt; rm -r d; echo c > c.txt")
    second = workspace.snapshot()
    changes = workspace.diff(first.root, second.root)
    objects.marks.add("s1", "after", 3, second.root, call_id="call_1", changes=changes)
    assert objects.marks.sessions_changing("d") == {"s1": 1}
    assert objects.marks.sessions_changing("a.txt") == {"s1": 1}
    assert objects.marks.sessions_changing("a") == {}
    plan = workspace.plan_restore(first.root, since=second.root)
    restore(workspace, plan, since=second.root)
    assert (project / "a.txt").read_text() == "one\n" and not (project / "c.txt").exists()
    assert (project / "d" / "b.txt").read_text() == "b\n"
    assert objects.marks.roots() == {"s1": [first.root, second.root]}
    objects.marks.forget_sessions(["s1"])
    collected = objects.collect([], grace_seconds=-10)
    assert collected.kept == 0 and collected.deleted > 0
    if stores.is_pg:
        assert not (memory / "workspace" / "objects.sqlite3").exists()
    workspace.close()
    objects.close()


def test_retention_drops_old_marks_but_each_sessions_newest(tmp_path: Path,
                                                            memory: Path) -> None:
    project = _project(tmp_path / "p", {"a.txt": "1"})
    workspace = _workspace(project, memory)
    roots = []
    for i in range(3):
        (project / "a.txt").write_text(f"version {i}")
        roots.append(workspace.snapshot().root)
        workspace.objects.marks.add("s1", "message", i + 2, roots[-1])
    workspace.objects.marks.add("s2", "message", 2, roots[0])
    done = collect(workspace.objects, lambda _sid: True, retention_days=0, grace_seconds=-10)
    assert done.marks_expired == 2 and done.sessions_gone == 0
    assert [m.root for m in workspace.objects.marks.of_session("s1")] == [roots[2]]
    assert [m.root for m in workspace.objects.marks.of_session("s2")] == [roots[0]]
    assert workspace.has(roots[0]) and workspace.has(roots[2]) and not workspace.has(roots[1])
    assert not due(workspace.objects)


def test_fifos_and_sockets_are_never_opened_nor_recorded(tmp_path: Path, memory: Path) -> None:
    import socket

    project = _project(tmp_path / "p", {"a.txt": "a"})
    os.mkfifo(project / "pipe")  # opening it for reading would block forever
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(project / "sock"))
    try:
        workspace = _workspace(project, memory)
        first = workspace.snapshot()
        assert _paths(workspace, first.root) == {"a.txt": "f"}
        (project / "a.txt").write_text("b")
        second = workspace.snapshot()
        plan = workspace.plan_restore(first.root)
        restore(workspace, plan)
        assert (project / "pipe").is_fifo() and (project / "sock").is_socket()
        assert (project / "a.txt").read_text() == "a" and second.root != first.root
    finally:
        sock.close()


def test_a_stopped_snapshot_records_nothing_and_the_next_one_is_whole(
    tmp_path: Path, memory: Path
) -> None:
    import threading

    from actors.workspace._snapshot import SnapshotStopped

    project = _project(tmp_path / "p", {f"d{i}/f.txt": str(i) for i in range(5)})
    workspace = _workspace(project, memory)
    stop = threading.Event()
    stop.set()
    with pytest.raises(SnapshotStopped):
        workspace.snapshot(stop=stop)
    assert workspace.objects.usage().objects == 0 and not workspace.cache.dirs
    snap = workspace.snapshot()
    other = tmp_path / "other-memory"
    other.mkdir(mode=0o700)
    assert snap.files == 5 and snap.root == _workspace(project, other).snapshot().root
