#!/usr/bin/env python
"""Finding sessions at size: ``--list-sessions`` and the resume picker over 2,000 sessions.

Run from the repository root::

    python benchmarks/sessions.py              # 2,000 sessions in this project, 500 elsewhere
    python benchmarks/sessions.py --quick      # 200 and 50: a smoke run

A scratch SQLite store (under the system temp dir, removed at the end) is filled with
sessions of about 20 ~300-byte messages each (a fixed seed; setup is not timed); the project
measured holds ``--sessions`` of them and another project a quarter as many. Each figure is a
median of wall-clock runs (``time.perf_counter``), printed beside its baseline:

* **--list-sessions** (in the process): what the command does once the store is open: the
  project's rows and the table printed (``repl.session_commands.list_sessions``), with
  ``--all`` and ``--json`` too; the baseline is the store query alone, and the listing of
  every session without the project filter (the query before project scoping).
* **--list-sessions** (a whole process, ``python -m repl --list-sessions``) beside
  ``python -m repl --version``, which is Python and the harness starting and nothing else.
* **picker opens** (in the process): ``SessionPicker`` built, its rows loaded, the first
  row's preview read and the first frame drawn to a 160x40 terminal; baseline: the rows alone.
* **picker opens** (a whole process in a pseudo-terminal): ``harness -r`` started until the
  first session's preview is on the screen, beside ``harness --version`` in the same pty.

Targets (from "Finding and continuing work"): --list-sessions under 50 ms and the picker
open under 200 ms at 2,000 sessions; both are checked on the in-process figures (the work the
command adds to an interpreter already started), and the whole-process figures are printed so
start-up is visible rather than hidden.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from actors.store import SqliteStore  # noqa: E402
from repl import session_commands  # noqa: E402

SEED = 20261201
WORDS = ["cache", "parser", "deploy", "config", "test", "build", "error", "fix", "module",
         "request", "response", "timeout", "session", "token", "schema", "migration", "index",
         "query", "branch", "commit", "review", "patch", "release", "staging", "metrics",
         "latency", "memory", "disk", "network", "handler", "retry", "worker", "queue"]


def text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def populate(store: SqliteStore, project: str, other: str, count: int) -> None:
    rng = random.Random(SEED)
    for n in range(count + count // 4):
        messages: list[dict[str, Any]] = [{"role": "system", "content": "You are an agent."}]
        for _ in range(10):
            messages.append({"role": "user", "content": text(rng, 40)})
            messages.append({"role": "assistant", "content": text(rng, 60)})
        store.create_session(messages=messages, project_root=project if n < count else other)


def median_ms(fn: Callable[[], object], runs: int) -> float:
    fn()  # warm the caches as a second listing in a session would find them
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def picker_open(store: SqliteStore, project: str, *, draw: bool) -> None:
    """Build the picker, load its rows and the first preview, draw one frame (or not)."""
    from prompt_toolkit.application import create_app_session
    from prompt_toolkit.data_structures import Size
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output.vt100 import Vt100_Output

    from repl.interactive.picker import SessionPicker

    screen = io.StringIO()
    with create_pipe_input() as pipe, create_app_session(
        input=pipe, output=Vt100_Output(screen, lambda: Size(40, 160), term="xterm")
    ):
        picker = SessionPicker(store, project)
        chooser = picker.chooser
        chooser._first_rows()
        if chooser.rows:
            chooser._previews[chooser.rows[0].key] = picker.preview(chooser.rows[0])
        if draw:
            app = chooser.app

            def drawn(_app: object) -> None:
                if not app.is_done and not app.future.done():  # type: ignore[union-attr]
                    app.exit()

            app.after_render += drawn
            app.run()
            assert "Resume a session" in screen.getvalue()


def process_ms(args: list[str], memory_dir: Path, cwd: str, runs: int) -> float:
    import subprocess

    env = {**os.environ, "AGENT_HARNESS_MEMORY_DIR": str(memory_dir), "PYTHONPATH": str(ROOT)}
    env.pop("AGENT_HARNESS_STORE", None)

    def once() -> None:
        subprocess.run([sys.executable, "-m", "repl", *args], cwd=cwd, env=env, check=True,
                       capture_output=True, timeout=60)

    return median_ms(once, runs)


def pty_ms(args: list[str], until: str, memory_dir: Path, cwd: str, runs: int) -> float:
    import pexpect

    env = {**os.environ, "AGENT_HARNESS_MEMORY_DIR": str(memory_dir), "PYTHONPATH": str(ROOT),
           "TERM": "xterm", "PROMPT_TOOLKIT_NO_CPR": "1"}
    env.pop("AGENT_HARNESS_STORE", None)

    def once() -> None:
        child = pexpect.spawn(sys.executable, ["-m", "repl", *args], env=env, cwd=cwd,
                              encoding="utf-8", timeout=30, dimensions=(40, 160))
        child.expect(until)
        child.send("\x1b")  # Esc leaves the picker (--version has ended already)
        child.expect(pexpect.EOF)
        child.close()

    return median_ms(once, runs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=2_000)
    parser.add_argument("--quick", action="store_true", help="200 sessions, fewer runs")
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args()
    count = 200 if args.quick else args.sessions
    runs = 5 if args.quick else args.runs
    process_runs = 3 if args.quick else 7
    work = Path(tempfile.mkdtemp(prefix="harness-sessions-bench-"))
    try:
        memory_dir = work / "memory"
        project = str((work / "project").resolve())
        other = str((work / "other").resolve())
        os.makedirs(project)
        started = time.perf_counter()
        store = SqliteStore(memory_dir)
        populate(store, project, other, count)
        setup = time.perf_counter() - started
        sink = io.StringIO()

        def listing(**kw: Any) -> Callable[[], object]:
            def run() -> None:
                sink.seek(0)
                sink.truncate()
                session_commands.list_sessions(store, include_archived=False, out=sink, **kw)
            return run

        rows: list[tuple[str, float, str, float]] = []
        rows.append((
            f"--list-sessions ({count} here)",
            median_ms(listing(as_json=False, project_root=project), runs),
            "store query alone",
            median_ms(lambda: store.list_sessions(project_root=project, include_empty=False),
                      runs),
        ))
        rows.append((
            f"--list-sessions --all ({count + count // 4})",
            median_ms(listing(as_json=False, project_root=None), runs),
            "every row, unfiltered query",
            median_ms(lambda: store.list_sessions(), runs),
        ))
        rows.append((
            "--list-sessions --json",
            median_ms(listing(as_json=True, project_root=project), runs),
            "store query alone",
            median_ms(lambda: store.list_sessions(project_root=project, include_empty=False),
                      runs),
        ))
        picker_ms = median_ms(lambda: picker_open(store, project, draw=True), runs)
        rows.append((
            "picker opens (rows, preview, first frame)",
            picker_ms,
            "rows and preview, not drawn",
            median_ms(lambda: picker_open(store, project, draw=False), runs),
        ))
        store.close()
        rows.append((
            "python -m repl --list-sessions (process)",
            process_ms(["--list-sessions"], memory_dir, project, process_runs),
            "python -m repl --version",
            process_ms(["--version"], memory_dir, project, process_runs),
        ))
        rows.append((
            "harness -r until the preview shows (pty)",
            pty_ms(["-r"], "Assistant: ", memory_dir, project, process_runs),
            "harness --version (pty)",
            pty_ms(["--version"], "harness ", memory_dir, project, process_runs),
        ))
        width = max(len(r[0]) for r in rows)
        bwidth = max(len(r[2]) for r in rows)
        print(f"{count} sessions in this project, {count // 4} in another; "
              f"setup {setup:.0f} s (not timed); medians of {runs} runs "
              f"({process_runs} for processes)\n")
        print(f"| {'operation'.ljust(width)} | time     | {'baseline'.ljust(bwidth)} | time     |")
        print(f"|{'-' * (width + 2)}|----------|{'-' * (bwidth + 2)}|----------|")
        for name, ms, base, base_ms in rows:
            print(f"| {name.ljust(width)} | {ms:6.1f} ms | {base.ljust(bwidth)} | "
                  f"{base_ms:6.1f} ms |")
        listed = rows[0][1]
        print(f"\ntarget --list-sessions < 50 ms: {listed:.1f} ms "
              f"({'met' if listed < 50 else 'NOT met'})")
        print(f"target picker open < 200 ms: {picker_ms:.1f} ms "
              f"({'met' if picker_ms < 200 else 'NOT met'})")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
