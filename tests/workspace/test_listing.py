"""The listings a snapshot keeps: a directory whose own stat is unchanged is not listed again,
and nothing it holds is missed for it (new files, a .gitignore changed above it, racy
directories, a stat cache that lies)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from actors.workspace import Workspace, open_objects
from actors.workspace._diff import Trees
from actors.workspace._statcache import RACY_NS


def _old(path: Path) -> None:
    """``path`` and everything below it modified an hour ago (neither files nor directories
    are racily recent then)."""
    past = time.time() - 3600
    for top, dirs, files in os.walk(path):
        for name in [*dirs, *files]:
            os.utime(os.path.join(top, name), (past, past), follow_symlinks=False)
    os.utime(path, (past, past))


def _make(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    _old(root)
    return root


def _files(workspace: Workspace, root: bytes) -> set[str]:
    return {p for p, _e in Trees(workspace.objects).files(root)}


def test_an_unchanged_directory_keeps_its_listing_across_runs(tmp_path: Path,
                                                             memory: Path) -> None:
    project = _make(tmp_path / "p", {"a/x.txt": "x\n", "a/b/y.txt": "y\n", "z.txt": "z\n"})
    workspace = Workspace(project, memory, open_objects(memory))
    first = workspace.snapshot()
    listing = workspace.cache.dirs["a"].listing
    assert listing is not None and listing[4] == ("x.txt",) and listing[5] == ("b",)
    workspace.close()
    again = Workspace(project, memory, open_objects(memory))  # read back from disk
    assert again.cache.dirs["a"].listing == listing
    (project / "a" / "x.txt").write_text("changed\n")  # content: the directory's stat stays
    second = again.snapshot()
    assert second.root != first.root and second.changed_dirs == 2  # a and the root
    entry = Trees(again.objects).entry(second.root, "a/x.txt")
    assert entry is not None and again.objects.load(entry.oid) == b"changed\n"


def test_a_file_added_to_a_listed_directory_is_seen_even_with_its_mtime_put_back(
    tmp_path: Path, memory: Path
) -> None:
    project = _make(tmp_path / "p", {"a/x.txt": "x\n"})
    workspace = Workspace(project, memory, open_objects(memory))
    workspace.snapshot()
    before = os.stat(project / "a")
    (project / "a" / "new.txt").write_text("new\n")
    os.utime(project / "a", ns=(before.st_atime_ns, before.st_mtime_ns))  # ctime moves
    assert os.stat(project / "a").st_mtime_ns == before.st_mtime_ns
    snap = workspace.snapshot()
    assert _files(workspace, snap.root) == {"a/x.txt", "a/new.txt"}


def test_a_gitignore_changed_above_an_unchanged_directory_changes_what_it_keeps(
    tmp_path: Path, memory: Path
) -> None:
    project = _make(tmp_path / "p", {".gitignore": "*.log\n", "a/b/keep.txt": "k\n",
                                     "a/b/run.log": "log\n"})
    workspace = Workspace(project, memory, open_objects(memory))
    first = workspace.snapshot()
    assert _files(workspace, first.root) == {".gitignore", "a/b/keep.txt"}
    workspace.close()
    (project / ".gitignore").write_text("*.tmp\n")  # a/ and a/b/ are untouched
    workspace = Workspace(project, memory, open_objects(memory))
    second = workspace.snapshot()
    assert _files(workspace, second.root) == {".gitignore", "a/b/keep.txt", "a/b/run.log"}
    (project / ".gitignore").write_text("*.txt\n")
    third = workspace.snapshot()
    assert _files(workspace, third.root) == {".gitignore", "a/b/run.log"}


def test_a_racily_recent_directory_is_listed_again(tmp_path: Path, memory: Path) -> None:
    project = _make(tmp_path / "p", {"a/x.txt": "x\n", "b/y.txt": "y\n"})
    (project / "a" / "fresh.txt").write_text("fresh\n")  # a's mtime: now
    workspace = Workspace(project, memory, open_objects(memory))
    workspace.snapshot()
    assert os.stat(project / "a").st_mtime_ns > time.time_ns() - RACY_NS
    assert workspace.cache.dirs["a"].listing is None  # an entry added in its clock tick
    assert workspace.cache.dirs["b"].listing is not None  # would not move it: not kept
    _old(project)
    workspace.snapshot()
    assert workspace.cache.dirs["a"].listing is not None  # once it has aged, it is


def test_a_stat_cache_that_lies_about_a_listing_never_makes_a_wrong_snapshot(
    tmp_path: Path, memory: Path
) -> None:
    project = _make(tmp_path / "p", {"a/x.txt": "x\n", "a/y.txt": "y\n"})
    workspace = Workspace(project, memory, open_objects(memory))
    right = workspace.snapshot()
    state = workspace.cache.dirs["a"]
    assert state.listing is not None
    stamp, digest, has_ignore, count, names, subs = state.listing
    # Its stamp is the directory's, but it names a file that is not there: listed again.
    state.listing = (stamp, digest, has_ignore, count, (*names, "gone.txt"), subs)
    assert workspace.snapshot().root == right.root
    # A name that is now a FIFO (a stale listing under the same stamp): never opened.
    os.unlink(project / "a" / "y.txt")
    os.mkfifo(project / "a" / "y.txt")
    stamp_now = os.stat(project / "a")  # y.txt's removal moved the stamp...
    state.listing = ((stamp_now.st_mtime_ns, stamp_now.st_ctime_ns, stamp_now.st_ino,
                      stamp_now.st_dev), digest, has_ignore, count, names, subs)
    snap = workspace.snapshot()  # ...so the lie is made by hand: y.txt, a FIFO, is left out
    assert _files(workspace, snap.root) == {"a/x.txt"}
