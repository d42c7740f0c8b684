"""The .gitignore rules of workspace snapshots, checked against git itself.

Each case writes real ``.gitignore`` files and files into a tmp project that is also a git
repository, and compares the files a snapshot keeps with the files ``git ls-files --others
--exclude-standard`` lists (git's own reading of the same rules).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from actors.workspace import Workspace, open_objects
from actors.workspace._diff import Trees
from actors.workspace._ignore import Rules, parse

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

FILES = [
    "a.txt", "b.log", "keep.log", "build/out.o", "build/sub/deep.o", "src/build/x.py",
    "src/main.py", "src/main.pyc", "src/__pycache__/m.cpython.pyc", "doc/frotz/a.md",
    "a/doc/frotz/b.md", "docs/x.md", "logs/today.log", "logs/keep/this.log", "x/y/z/w.txt",
    "foo/bar/baz.txt", "foo/qux.txt", "abc/def/ghi", "space name.txt", "#hash.txt",
    "!bang.txt", "dir.d/file", "file.d", "Makefile", "q1.txt", "q22.txt", "range5.c",
    "sub/.gitignore_target", "sub/inner/only.txt", "sub/other.txt", "tail ",
]

CASES = {
    "plain names": ("*.log\nbuild/\n", {}),
    "negation": ("*.log\n!keep.log\n", {}),
    "anchored": ("/a.txt\ndoc/frotz/\n", {}),
    "double star": ("**/frotz\nabc/**\nx/**/w.txt\n", {}),
    "middle slash": ("foo/bar\n", {}),
    "classes and ?": ("q?.txt\nrange[0-9].c\n[!a-z]*.txt\n", {}),
    "escapes": ("\\#hash.txt\n\\!bang.txt\nspace\\ name.txt\n", {}),
    "dir only vs file": ("*.d/\n", {}),
    "comments and blanks": ("# a comment\n\n   \nMakefile\n", {}),
    "nested gitignore": ("*.txt\n", {"sub/.gitignore": "!other.txt\ninner/\n"}),
    "deeper overrides": ("", {"src/.gitignore": "*.pyc\n__pycache__/\n/build\n"}),
    "re-include under ignored dir": ("logs/\n!logs/keep/\n", {}),
    "trailing spaces": ("tail \\ \n*.md   \n", {}),
}


def _git_files(project: Path) -> set[str]:
    subprocess.run(["git", "init", "-q", str(project)], check=True, timeout=30)
    out = subprocess.run(
        ["git", "-C", str(project), "ls-files", "--others", "--exclude-standard", "-z"],
        check=True, capture_output=True, timeout=30,
    ).stdout
    return {p for p in out.decode().split("\0") if p}


def _snapshot_files(project: Path, memory: Path) -> set[str]:
    memory.mkdir(mode=0o700)
    objects = open_objects(memory)
    workspace = Workspace(project, memory, objects)
    root = workspace.snapshot().root
    paths = {path for path, _entry in Trees(objects).files(root)}
    workspace.close()
    return paths


@pytest.mark.parametrize("case", sorted(CASES))
def test_kept_files_match_git(tmp_path: Path, case: str) -> None:
    root_rules, nested = CASES[case]
    project = tmp_path / "project"
    for name in FILES:
        path = project / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(name)
    (project / ".gitignore").write_text(root_rules)
    for name, text in nested.items():
        (project / name).write_text(text)
    ours = _snapshot_files(project, tmp_path / "memory")
    git = _git_files(project)
    assert ours == git, (sorted(ours - git), sorted(git - ours))


def test_git_directory_never_in_a_snapshot(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True, timeout=30)
    (project / "f.txt").write_text("x")
    (project / "worktree").mkdir()
    (project / "worktree" / ".git").write_text("gitdir: /elsewhere\n")  # a worktree's .git
    assert _snapshot_files(project, tmp_path / "memory") == {"f.txt"}


def test_rules_without_any_rule_match_nothing() -> None:
    assert not Rules.EMPTY.ignored("anything", False)
    assert not Rules.EMPTY.extended("# only a comment\n", "").ignored("x", True)


def test_a_pattern_git_cannot_read_is_skipped() -> None:
    rules = parse("[\n*.o\n", "")
    assert len(rules) == 2  # "[" is a literal bracket, as in git
    assert Rules(tuple(rules)).ignored("a.o", False)
    assert Rules(tuple(rules)).ignored("[", False)
