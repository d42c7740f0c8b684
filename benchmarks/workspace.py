#!/usr/bin/env python
"""What a workspace snapshot costs, beside ``git add -A && git commit`` on a shadow repository.

Run from the repository root::

    python benchmarks/workspace.py               # 10,000 files, 200 turns (about 2 minutes)
    python benchmarks/workspace.py --files 2000 --turns 50 --runs 5
    python benchmarks/workspace.py --json
    python benchmarks/workspace.py --tree /tmp/main   # side by side with another checkout

With ``--tree DIR`` (another checkout of the harness, e.g. ``git archive main | tar -x -C
DIR``) it runs instead, for this tree and each one given, interleaved (run 1 of each, then
run 2 of each: the machine's load falls on all alike), each in a child process importing
that tree's code (``PYTHONPATH``):

- **rewrite**: a project of ``--rewrite-mb`` MB (1,600 source-like files of 4 to 12 KB, 20
  per directory) snapshotted, then ``--rewrite-turns`` turns that each rewrite every file
  with one line changed (a rename across the project, a formatter), a snapshot per turn (as
  the keeper's after a command); the bytes the workspace store takes on disk after them,
  against the project's own size, and the median snapshot of a turn;
- **tree**: the 10,000-file project below, its first snapshot, and the median (wall and CPU)
  of ``--runs`` snapshots of it unchanged, with 1, and with 100 files changed.

A tmp project of ``--files`` files (source-like text of 200 B to 8 KB, 20 per directory, 5
directories per level) is snapshotted into a fresh workspace store, and the same tree is
committed to a shadow git repository (``git --git-dir=SHADOW --work-tree=PROJECT``, the way
the peers that snapshot with git do it; the project's own files are never touched). Figures,
each the median of ``--runs``:

- **unchanged**: nothing changed since the last snapshot / commit;
- **1 changed**, **100 changed**: that many files rewritten (new content) before each one;
- **storage after N turns**: ``--turns`` turns, each changing 3 files and adding one every
  10th turn, a snapshot (commit) per turn; the bytes of the workspace store file against the
  shadow repository's objects (``du`` of the .git directory, loose objects as git leaves them,
  and after ``git gc``), and against the tree's own size.
- **per tool call**: what a side-effecting call waits for, through the real workspace keeper
  (its ``before`` and ``after`` snapshots and their marks, a session store beside it), the call
  itself changing one file: a call on its own (the model thought before it: both snapshots
  walk the tree) and the next call of a batch (asked at once: its ``before`` is the last
  walk's).

The files are aged past the racily-clean window before the first measurement (a file written
within 2 s of a snapshot is read again by the next one, as git does).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from actors.core.events import EventSink
from actors.core.ids import new_session_id
from actors.store import SessionStore
from actors.workspace import Workspace, open_objects
from actors.workspace.keeper import Request, WorkspaceClient, WorkspaceKeeper

WORDS = ["def", "class", "return", "import", "self", "value", "result", "data", "print", "for",
         "in", "if", "else", "while", "try", "except", "with", "open", "path", "name", "items",
         "list", "dict", "str", "int", "None", "True", "False"]


def _text(rng: random.Random, size: int) -> str:
    out, total = [], 0
    while total < size:
        line = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 10)))
        out.append(line)
        total += len(line) + 1
    return "\n".join(out) + "\n"


def make_project(root: Path, files: int, rng: random.Random) -> list[Path]:
    paths = []
    for i in range(files):
        parts = []
        n = i // 20
        while True:
            parts.append(f"d{n % 5}")
            n //= 5
            if n == 0:
                break
        path = root.joinpath(*parts, f"f{i}.py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_text(rng, rng.randint(200, 8000)))
        paths.append(path)
    return paths


def age(root: Path) -> None:
    past = time.time() - 3600
    for top, dirs, names in os.walk(root):
        if ".git" in dirs:
            dirs.remove(".git")
        for name in [*dirs, *names]:
            os.utime(os.path.join(top, name), (past, past), follow_symlinks=False)


def lstat_walk(root: Path) -> int:
    """The floor: an lstat of every file from Python, nothing else (as a snapshot walks)."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW

    def walk(fd: int) -> int:
        n = 0
        with os.scandir(fd) as scan:
            entries = list(scan)
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                child = os.open(entry.name, flags, dir_fd=fd)
                try:
                    n += walk(child)
                finally:
                    os.close(child)
            else:
                entry.stat(follow_symlinks=False)
                n += 1
        return n

    fd = os.open(root, flags)
    try:
        return walk(fd)
    finally:
        os.close(fd)


def du(path: Path) -> int:
    total = 0
    for top, _dirs, names in os.walk(path):
        for name in names:
            total += os.lstat(os.path.join(top, name)).st_size
    return total


class Shadow:
    """A shadow git repository over the project (the baseline)."""

    def __init__(self, git_dir: Path, project: Path) -> None:
        self.env = {**os.environ, "GIT_DIR": str(git_dir), "GIT_WORK_TREE": str(project),
                    "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b",
                    "GIT_COMMITTER_EMAIL": "b@b"}
        self.git_dir = git_dir
        self.project = project
        subprocess.run(["git", "init", "-q"], env=self.env, check=True, cwd=project)

    def commit(self) -> None:
        subprocess.run("git add -A && git commit -q --allow-empty -m turn", shell=True,
                       env=self.env, check=True, cwd=self.project)

    def gc(self) -> None:
        subprocess.run(["git", "gc", "-q"], env=self.env, check=True, cwd=self.project)


def per_call(project: Path, memory: Path, paths: list[Path], rng: random.Random,
             runs: int) -> dict[str, float]:
    """The median ms a side-effecting call waits for its snapshots (see the module doc)."""
    store = SessionStore(memory)
    session = new_session_id()
    store.create_session(session, [{"role": "system", "content": "benchmark"}],
                         project_root=str(project))
    alone: list[float] = []
    batch: list[float] = []

    async def call(client: WorkspaceClient, call_id: str) -> float:
        start = time.perf_counter()
        await client.snapshot("before", call_id, "write_file")
        waited = time.perf_counter() - start
        path = rng.choice(paths)  # what the call does (not timed)
        path.write_text(_text(rng, rng.randint(200, 8000)) + call_id)
        start = time.perf_counter()
        await client.snapshot("after", call_id, "write_file")
        return (waited + time.perf_counter() - start) * 1000

    async def go() -> None:
        send, receive = anyio.create_memory_object_stream[Request](8)
        keeper = WorkspaceKeeper(project=project, memory_dir=memory, store=store,
                                 session_id=session, events=EventSink(None))
        async with anyio.create_task_group() as tg:
            await tg.start(keeper.run, receive)
            client = WorkspaceClient(send)
            await client.snapshot("message")  # the keeper has opened the workspace
            for i in range(runs):
                await anyio.sleep(0.3)  # the model thinks: the last walk is long past
                alone.append(await call(client, f"alone{i}"))
                batch.append(await call(client, f"batch{i}"))  # the next call, at once
            client.close()

    try:
        anyio.run(go)
    finally:
        store.close()
    return {"alone": statistics.median(alone), "batch": statistics.median(batch)}


CPU: dict[str, float] = {}  # the same figures in CPU time (this process: user + system)


def timed(runs: int, prepare: Callable[[], None], action: Callable[[], Any],
          name: str = "") -> float:
    """The median wall time of ``action`` in ms (its median CPU time goes to ``CPU[name]``).
    On a shared machine the CPU time is the steadier figure: it leaves out the time spent
    waiting for a core."""
    times, cpu = [], []
    for _ in range(runs):
        prepare()
        start, start_cpu = time.perf_counter(), time.process_time()
        action()
        cpu.append((time.process_time() - start_cpu) * 1000)
        times.append((time.perf_counter() - start) * 1000)
    CPU[name] = statistics.median(cpu)
    return statistics.median(times)


def make_sources(root: Path, megabytes: float, rng: random.Random) -> list[Path]:
    """Source-like files of 4 to 12 KB, 20 per directory, until ``megabytes`` MB."""
    paths: list[Path] = []
    total, budget = 0, megabytes * 1024 * 1024
    while total < budget:
        i = len(paths)
        path = root / f"pkg{i // 400}" / f"mod{i // 20}" / f"f{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        text = _text(rng, rng.randint(4000, 12000))
        path.write_text(text)
        paths.append(path)
        total += len(text)
    return paths


def rewrite_case(turns: int, megabytes: float) -> dict[str, Any]:
    """The rewrite case of the module doc, in this process (this tree's code)."""
    rng = random.Random(5)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        project, memory = base / "project", base / "memory"
        project.mkdir()
        memory.mkdir(mode=0o700)
        paths = make_sources(project, megabytes, rng)
        project_bytes = du(project)
        age(project)
        time.sleep(2.1)  # ctime too is past the racily-clean window
        workspace = Workspace(project, memory, open_objects(memory))
        workspace.snapshot()
        times, cpu = [], []
        for turn in range(turns):
            for path in paths:  # every file: one line changed (not timed)
                lines = path.read_text().split("\n")
                lines[(turn * 7 + len(lines) // 3) % len(lines)] = f"renamed_{turn} = value"
                path.write_text("\n".join(lines))
            start, start_cpu = time.perf_counter(), time.process_time()
            workspace.snapshot()
            cpu.append((time.process_time() - start_cpu) * 1000)
            times.append((time.perf_counter() - start) * 1000)
        workspace.close()
        workspace.objects.close()
        stored = du(memory / "workspace")
    return {"project_bytes": project_bytes, "files": len(paths), "turns": turns,
            "store_bytes": stored, "ratio": stored / project_bytes,
            "turn_ms": statistics.median(times), "turn_cpu_ms": statistics.median(cpu)}


def tree_case(files: int, runs: int) -> dict[str, Any]:
    """The tree case of the module doc, in this process (this tree's code)."""
    rng = random.Random(1)
    CPU.clear()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        project, memory = base / "project", base / "memory"
        project.mkdir()
        memory.mkdir(mode=0o700)
        paths = make_project(project, files, rng)
        age(project)
        time.sleep(2.1)
        workspace = Workspace(project, memory, open_objects(memory))
        start = time.perf_counter()
        workspace.snapshot()
        found: dict[str, Any] = {"first_ms": (time.perf_counter() - start) * 1000}
        found["unchanged_ms"] = timed(runs, lambda: None, workspace.snapshot, "unchanged")
        counter = [0]

        def change(n: int) -> Callable[[], None]:
            def prepare() -> None:
                counter[0] += 1
                for path in rng.sample(paths, n):
                    path.write_text(_text(rng, rng.randint(200, 8000)) + str(counter[0]))
            return prepare

        for n in (1, 100):
            found[f"changed_{n}_ms"] = timed(runs, change(n), workspace.snapshot,
                                             f"changed_{n}")
        workspace.close()
        workspace.objects.close()
    found["cpu_ms"] = dict(CPU)
    return found


def side_by_side(args: argparse.Namespace) -> None:
    """``--tree``: the rewrite and tree cases for this tree and the others, interleaved."""
    here = Path(__file__).resolve().parent.parent
    trees = [here, *(Path(t).resolve() for t in args.tree)]
    results: dict[str, dict[str, list[dict[str, Any]]]] = {
        str(t): {"rewrite": [], "tree": []} for t in trees}
    for _run in range(args.tree_runs):
        for case in ("tree", "rewrite"):
            for tree in trees:
                done = subprocess.run(
                    [sys.executable, __file__, "--child", case, "--files", str(args.files),
                     "--runs", str(args.runs), "--rewrite-turns", str(args.rewrite_turns),
                     "--rewrite-mb", str(args.rewrite_mb)],
                    env={**os.environ, "PYTHONPATH": str(tree)}, cwd=tmp_cwd(),
                    check=True, capture_output=True, text=True, timeout=3600)
                results[str(tree)][case].append(json.loads(done.stdout))
    if args.json:
        print(json.dumps(results, indent=2))
        return
    mb = 1024 * 1024

    def med(tree: Path, case: str, key: str, sub: str = "") -> float:
        values = [r[key][sub] if sub else r[key] for r in results[str(tree)][case]]
        return float(statistics.median(values))

    first = results[str(here)]["rewrite"][0]
    print(f"rewrite: {first['turns']} turns rewriting every file (one line changed) of a "
          f"{first['project_bytes'] / mb:.1f} MB project of {first['files']} files; "
          f"median of {args.tree_runs} runs")
    print(f"{'':34}" + "".join(f"{_label(t, here):>22}" for t in trees))
    print(f"{'  snapshot storage after them':34}" + "".join(
        f"{med(t, 'rewrite', 'store_bytes') / mb:>9.1f} MB ({med(t, 'rewrite', 'ratio'):.2f}x)"
        for t in trees))
    print(f"{'  snapshot per turn (wall / CPU)':34}" + "".join(
        f"{med(t, 'rewrite', 'turn_ms'):>9.0f} / {med(t, 'rewrite', 'turn_cpu_ms'):.0f} ms"
        for t in trees))
    print(f"tree: {args.files} files, median of {args.runs} snapshots each, "
          f"median of {args.tree_runs} runs (wall / CPU)")
    for key, label, cpu in (("first_ms", "first snapshot", ""),
                            ("unchanged_ms", "unchanged tree", "unchanged"),
                            ("changed_1_ms", "1 file changed", "changed_1"),
                            ("changed_100_ms", "100 files changed", "changed_100")):
        print(f"  {label:32}" + "".join(
            f"{med(t, 'tree', key):>9.1f}" + (f" / {med(t, 'tree', 'cpu_ms', cpu):.1f} ms"
                                              if cpu else " ms       ")
            for t in trees))
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


def _label(tree: Path, here: Path) -> str:
    return "this tree" if tree == here else tree.name


def tmp_cwd() -> str:
    """Where a child runs: not in a tree (so ``PYTHONPATH`` alone says which code it runs)."""
    return tempfile.gettempdir()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--tree", action="append", default=[], metavar="DIR",
                        help="another checkout to run side by side with this one")
    parser.add_argument("--tree-runs", type=int, default=3,
                        help="with --tree: runs of each case per tree")
    parser.add_argument("--rewrite-turns", type=int, default=25)
    parser.add_argument("--rewrite-mb", type=float, default=13.0)
    parser.add_argument("--child", choices=["rewrite", "tree"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "rewrite":
        print(json.dumps(rewrite_case(args.rewrite_turns, args.rewrite_mb)))
        return
    if args.child == "tree":
        print(json.dumps(tree_case(args.files, args.runs)))
        return
    if args.tree:
        side_by_side(args)
        return
    if shutil.which("git") is None:
        raise SystemExit("git is needed for the baseline")
    rng = random.Random(1)
    results: dict[str, Any] = {"files": args.files, "turns": args.turns, "runs": args.runs}
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        project, memory, shadow_dir = base / "project", base / "memory", base / "shadow.git"
        project.mkdir()
        memory.mkdir(mode=0o700)
        paths = make_project(project, args.files, rng)
        results["tree_bytes"] = du(project)
        age(project)
        time.sleep(2.1)  # ctime too is past the racily-clean window
        workspace = Workspace(project, memory, open_objects(memory))
        shadow = Shadow(shadow_dir, project)

        start = time.perf_counter()
        workspace.snapshot()
        results["first_ms"] = {"workspace": (time.perf_counter() - start) * 1000}
        start = time.perf_counter()
        shadow.commit()
        results["first_ms"]["git"] = (time.perf_counter() - start) * 1000

        def nothing() -> None:
            pass

        results["unchanged_ms"] = {
            "workspace": timed(args.runs, nothing, workspace.snapshot, "unchanged"),
            "git": timed(args.runs, nothing, shadow.commit),
            "floor": timed(args.runs, nothing, lambda: lstat_walk(project), "floor"),
        }
        counter = [0]

        def change(n: int) -> Callable[[], None]:
            def prepare() -> None:
                counter[0] += 1
                for path in rng.sample(paths, n):
                    path.write_text(_text(rng, rng.randint(200, 8000)) + str(counter[0]))
            return prepare

        for n in (1, 100):
            results[f"changed_{n}_ms"] = {
                "workspace": timed(args.runs, change(n), workspace.snapshot, f"changed_{n}"),
                "git": timed(args.runs, change(n), shadow.commit),
            }
        # Storage: from here, both stores see the same turns.
        shadow.gc()
        workspace.close()
        workspace.objects.close()
        store_file = memory / "workspace" / "objects.sqlite3"
        before = {"workspace": du(memory / "workspace"), "git": du(shadow_dir)}
        workspace = Workspace(project, memory, open_objects(memory))
        turn_ms = []
        for turn in range(args.turns):
            for path in rng.sample(paths, 3):
                with path.open("a") as f:
                    f.write(f"# turn {turn}\n")
            if turn % 10 == 0:
                new = project / "added" / f"t{turn}.py"
                new.parent.mkdir(exist_ok=True)
                new.write_text(_text(rng, 2000))
                paths.append(new)
            start = time.perf_counter()
            workspace.snapshot()
            turn_ms.append((time.perf_counter() - start) * 1000)
            shadow.commit()
        workspace.close()
        workspace.objects.close()
        after_ws = du(memory / "workspace")
        after_git = du(shadow_dir)
        shadow.gc()
        after_gc = du(shadow_dir)
        results["per_call_ms"] = per_call(project, memory, paths, rng, args.runs)
        results["storage"] = {
            "workspace_bytes_before": before["workspace"], "workspace_bytes_after": after_ws,
            "git_bytes_before": before["git"], "git_bytes_after": after_git,
            "git_bytes_after_gc": after_gc, "store_file": store_file.stat().st_size,
            "turn_snapshot_median_ms": statistics.median(turn_ms),
        }
    results["cpu_ms"] = CPU
    if args.json:
        print(json.dumps(results, indent=2))
        return
    mb = 1024 * 1024
    print(f"project: {args.files} files, {results['tree_bytes'] / mb:.1f} MB; "
          f"median of {args.runs} runs")
    print(f"{'':28} {'workspace':>12} {'git add+commit':>16}")
    for key, label in (("first_ms", "first snapshot"), ("unchanged_ms", "unchanged tree"),
                       ("changed_1_ms", "1 file changed"),
                       ("changed_100_ms", "100 files changed")):
        row = results[key]
        floor = f"   (floor, an lstat walk: {row['floor']:.1f} ms)" if "floor" in row else ""
        print(f"{label:28} {row['workspace']:>9.1f} ms {row['git']:>13.1f} ms{floor}")
    s = results["storage"]
    print(f"storage after {args.turns} turns (3 files changed a turn, a file added every 10th):")
    grown_ws = (s["workspace_bytes_after"] - s["workspace_bytes_before"]) / mb
    grown_git = (s["git_bytes_after"] - s["git_bytes_before"]) / mb
    grown_gc = (s["git_bytes_after_gc"] - s["git_bytes_before"]) / mb
    print(f"{'  grown by':28} {grown_ws:>9.2f} MB {grown_git:>13.2f} MB"
          f"  (git after gc: {grown_gc:.2f} MB)")
    print(f"{'  in all':28} {s['workspace_bytes_after'] / mb:>9.2f} MB "
          f"{s['git_bytes_after'] / mb:>13.2f} MB"
          f"  (git after gc: {s['git_bytes_after_gc'] / mb:.2f} MB)")
    print(f"{'  snapshot per turn':28} {s['turn_snapshot_median_ms']:>9.1f} ms")
    calls = results["per_call_ms"]
    print("a write_file waits for its before and after snapshots (one file changed): "
          f"{calls['alone']:.1f} ms on its own, {calls['batch']:.1f} ms as the next call of a "
          "batch")
    print("CPU time of the snapshots (user + system, median): " + ", ".join(
        f"{name} {ms:.1f} ms" for name, ms in CPU.items() if name))
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
