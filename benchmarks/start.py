#!/usr/bin/env python
"""How fast the harness starts: the REPL to its first prompt, and ``--list-sessions``.

Run from the repository root::

    python benchmarks/start.py                       # 10 runs of each
    python benchmarks/start.py --runs 20 --json
    python benchmarks/start.py --tree /path/to/other/checkout   # side by side with another tree

* **REPL to the first prompt**: ``python -m repl --base-url URL`` in a pseudo-terminal
  (pexpect, 40x160), against the scripted chat-completions server of the tests, in a fresh
  memory directory; the time from the spawn until ``You:`` is on the screen. Beside it, the
  floor: ``python -c "print('You:')"`` in the same pseudo-terminal.
* **--list-sessions at 2,000 sessions**: the whole process, ``python -m repl --list-sessions``
  over a store of 2,000 saved sessions (four messages each), until it exits.
* **--resume of a 20,000-message session** (``--resume-messages``): the REPL resuming a session
  of that many ~1 KB messages (benchmarks/store.py's generated conversation), to its first
  prompt, and the process's peak RSS (``/usr/bin/time -f %M``).

Each figure is the median of ``--runs`` runs; the trees (this one first, then each
``--tree``) are run in turn, interleaved, so the machine's load falls on all of them alike.
Progress goes to stderr, the table to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pexpect

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from actors.testing.scripted_server import Reply, ScriptedServer  # noqa: E402

PROMPT = "You:"
SESSIONS = 2_000
BENCHMARKS = Path(__file__).resolve().parent


def _env(tree: Path, memory: Path) -> dict[str, str]:
    """A user's environment: bytecode is cached (as after the first run of an install)."""
    env = {**os.environ, "AGENT_HARNESS_MEMORY_DIR": str(memory), "PYTHONPATH": str(tree),
           "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm", "OPENAI_API_KEY": "x",
           "HOME": str(memory.parent)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def to_prompt(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    """Seconds from spawning ``argv`` in a pseudo-terminal until the prompt shows."""
    start = time.perf_counter()
    child = pexpect.spawn(argv[0], argv[1:], env=env, cwd=str(cwd), encoding="utf-8",
                          timeout=20, dimensions=(40, 160))
    child.expect(PROMPT)
    seconds = time.perf_counter() - start
    child.sendcontrol("d")
    child.expect(pexpect.EOF, timeout=120)  # a resumed session saves on the way out
    child.close()
    return seconds


def whole_process(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, timeout=60)
    if done.returncode:
        raise SystemExit(f"{argv} failed: {done.stderr.strip()}")
    return time.perf_counter() - start


_POPULATE = """
import sys
from actors.store import SqliteStore
store = SqliteStore(sys.argv[1])
for i in range(int(sys.argv[2])):
    store.create_session(title=f"Session {i}", messages=[
        {"role": "user", "content": f"Question {i} about the parser."},
        {"role": "assistant", "content": f"Answer {i}."},
        {"role": "user", "content": "And the tests?"},
        {"role": "assistant", "content": "They pass."},
    ])
store.close()
"""


_POPULATE_ONE = """
import sys
sys.path.insert(0, sys.argv[3])
from store import SEED, TextGen
from actors.store import SqliteStore
store = SqliteStore(sys.argv[1])
messages = TextGen(SEED).conversation(int(sys.argv[2]))
sid = store.create_session(messages=messages[:2000], project_root=sys.argv[4])
for end in range(2000, len(messages), 2000):
    store.checkpoint(sid, messages[: end + 2000])
store.close()
print(sid)
"""


def populate_one(tree: Path, memory: Path, messages: int, project: Path) -> str:
    """One session of ``messages`` messages, written by ``tree``'s code; its id."""
    done = subprocess.run(
        [sys.executable, "-c", _POPULATE_ONE, str(memory), str(messages), str(BENCHMARKS),
         str(project)],
        env={**os.environ, "PYTHONPATH": str(tree)}, cwd=tree, check=True, timeout=600,
        capture_output=True, text=True)
    return done.stdout.strip()


def resumed(argv: list[str], env: dict[str, str], cwd: Path, rss_file: Path) -> tuple[float, int]:
    """Seconds to the prompt and peak RSS (KB) of ``argv`` run under ``/usr/bin/time``."""
    seconds = to_prompt(["/usr/bin/time", "-o", str(rss_file), "-f", "%M", *argv], env, cwd)
    return seconds, int(rss_file.read_text().split()[-1])


def populate(tree: Path, memory: Path) -> None:
    """A store of :data:`SESSIONS` sessions, written by ``tree``'s own code (its schema)."""
    subprocess.run([sys.executable, "-c", _POPULATE, str(memory), str(SESSIONS)],
                   env={**os.environ, "PYTHONPATH": str(tree)}, cwd=tree, check=True,
                   timeout=600)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="runs of each figure (default 10)")
    parser.add_argument("--tree", type=Path, action="append", default=[], metavar="DIR",
                        help="another checkout to measure beside this one (repeatable)")
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    parser.add_argument("--resume-messages", type=int, default=20_000, metavar="N",
                        help="messages of the resumed session (0: skip; default 20,000)")
    args = parser.parse_args(argv)
    trees = [REPO, *(t.resolve() for t in args.tree)]
    samples: dict[str, dict[str, list[float]]] = {
        str(t): {"prompt": [], "list": [], "resume": [], "rss": []} for t in trees}
    floor: list[float] = []
    with tempfile.TemporaryDirectory(prefix="start-bench-") as tmp, \
            ScriptedServer([Reply("hi")] * 1000) as server:
        work = Path(tmp)
        listed = {}
        for n, tree in enumerate(trees):
            listed[tree] = work / f"listed-{n}" / "memory"
            listed[tree].mkdir(parents=True)
            print(f"setup: {SESSIONS:,} sessions ({tree})", file=sys.stderr)
            populate(tree, listed[tree])
        big: dict[Path, tuple[Path, str]] = {}
        project = work / "project"
        project.mkdir()
        if args.resume_messages:
            for n, tree in enumerate(trees):
                memory = work / f"big-{n}" / "memory"
                memory.mkdir(parents=True)
                print(f"setup: one session of {args.resume_messages:,} messages ({tree})",
                      file=sys.stderr)
                big[tree] = (memory, populate_one(tree, memory, args.resume_messages, project))
        python = sys.executable
        for run in range(-1, args.runs):  # run -1 writes the bytecode caches; not counted
            print(f"run {run + 1} of {args.runs} (0: warm-up)", file=sys.stderr)
            seconds = to_prompt([python, "-c", f"print({PROMPT!r}); input()"],
                                dict(os.environ), work)
            if run >= 0:
                floor.append(seconds)
            for tree in trees:
                fresh = work / f"fresh-{run}-{trees.index(tree)}" / "memory"
                fresh.mkdir(parents=True)
                prompt = to_prompt([python, "-m", "repl", "--base-url", server.base_url],
                                   _env(tree, fresh), work)
                listing = whole_process([python, "-m", "repl", "--list-sessions"],
                                        _env(tree, listed[tree]), work)
                if run >= 0:
                    samples[str(tree)]["prompt"].append(prompt)
                    samples[str(tree)]["list"].append(listing)
                if tree in big and run in (-1, 0, 1, 2):  # a few: each rewrites the session
                    memory, sid = big[tree]
                    seconds, rss = resumed(
                        [python, "-m", "repl", "--base-url", server.base_url, "--resume", sid],
                        _env(tree, memory), project, work / "rss")
                    if run >= 0:
                        samples[str(tree)]["resume"].append(seconds)
                        samples[str(tree)]["rss"].append(rss / 1000)
    med = {t: {k: (1 if k == "rss" else 1000) * statistics.median(v) for k, v in s.items() if v}
           for t, s in samples.items()}
    names = ["this tree" if t == REPO else t.name for t in trees]
    print(f"| figure (median of {args.runs}) | {' | '.join(names)} | python alone |")
    print("|---|" + "---:|" * (len(trees) + 1))
    print("| REPL to the first prompt | " + " | ".join(
        f"{med[str(t)]['prompt']:.0f} ms" for t in trees)
        + f" | {1000 * statistics.median(floor):.0f} ms |")
    print(f"| --list-sessions, {SESSIONS:,} sessions (whole process) | " + " | ".join(
        f"{med[str(t)]['list']:.0f} ms" for t in trees) + " | |")
    if args.resume_messages:
        print(f"| --resume of {args.resume_messages:,} messages: to the prompt (median of 3) | "
              + " | ".join(f"{med[str(t)]['resume']:.0f} ms" for t in trees) + " | |")
        print(f"| --resume of {args.resume_messages:,} messages: peak RSS | "
              + " | ".join(f"{med[str(t)]['rss']:.0f} MB" for t in trees) + " | |")
    print(f"\nload average: {os.getloadavg()[0]:.1f} (2 cores)")
    if args.json:
        print(json.dumps({"median_ms": med, "floor_ms": 1000 * statistics.median(floor)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
