#!/usr/bin/env python
"""How fast the harness starts: the REPL to its first prompt, and ``--list-sessions``.

Run from the repository root::

    python benchmarks/start.py                       # 10 runs of each
    python benchmarks/start.py --runs 20 --json
    python benchmarks/start.py --tree /path/to/other/checkout   # side by side with another tree

* **REPL to the first prompt**: ``python -m repl --base-url URL`` in a pseudo-terminal
  (pexpect, 40x160), against the scripted chat-completions server of the tests, with the
  memory directory of the runs before (a user's start: the store and the workspace's
  database exist; each run's empty session is removed as it exits); the time from the spawn
  until ``You:`` is on the screen after the greeting. Beside it, the floor:
  ``python -c "print('You:')"`` in the same pseudo-terminal. The REPL runs in a project
  directory of its own, which does not hold the memory directory, as a user's project does
  not: one that holds it makes the session's open print a notice above the prompt (the
  project directory contains the harness's state), and the first-answer figure below would
  then carry what printing it costs (it held a message sent just after it up to 0.2 s,
  prompt_toolkit's pause between writes) instead of the start's. That case is a row of its
  own (the last of the REPL's).
* **REPL to the first prompt: CPU time and modules**: the same start, run through a driver
  that notes, the moment prompt_toolkit has drawn the first frame, the process's CPU time
  (user + system, Python's own start included) and how many modules are loaded
  (``sys.modules``, the driver's few included): what the start costs the machine, which the
  wall time on a shared machine shows only with its noise. Beside it, Python alone by the
  same measure (the CPU time when ``You:`` is printed).
* **REPL to the first prompt, first start**: the same in a new memory directory each run
  (the store and its schema are created first).
* **REPL to its first answer**: the same start (the memory directory of the runs before),
  a message sent the moment the prompt shows, until the scripted server's answer is on the
  screen and the prompt is back: what a start costs when something is asked at once (the
  session's open, the SDK's import and client, the request), whatever of it the prompt no
  longer waits for.
* **REPL: a message sent as a notice shows, to its answer**: the same start in a directory
  that holds the memory directory, so the session's open prints its notice above the
  prompt; a message sent the moment the notice is on the screen, timed from that moment
  until its answer is on the screen and the prompt is back.
* **--list-sessions at 2,000 sessions**: the whole process, ``python -m repl --list-sessions``
  over a store of 2,000 saved sessions (four messages each), until it exits.
* **--resume of a 20,000-message session** (``--resume-messages``): the REPL resuming a session
  of that many ~1 KB messages (benchmarks/store.py's generated conversation), to its first
  prompt, and the process's peak RSS (``/usr/bin/time -f %M``). Beside it, one turn on that
  session in print mode (``--resume ID -p hi``, the whole process: time and peak RSS), and the
  same in process (``Supervisor.open(resume=ID)`` then ``run_turn``: the resume's and the
  turn's milliseconds, and how many context rows each parsed and how many messages the model
  client encoded for the request).

Each figure is the median of ``--runs`` runs; the trees (this one first, then each
``--tree``) are run in turn, interleaved, so the machine's load falls on all of them alike.
Progress goes to stderr, the table to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pexpect

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from actors.testing.scripted_server import Reply, ScriptedServer  # noqa: E402

PROMPT = "You:"
ANSWER = "Pong from the scripted server."  # what every REPL run's message is answered
BIG_BUDGET = 10_000_000  # tokens: the 20,000-message session fits, its first turn is no compaction
SESSIONS = 2_000
BENCHMARKS = Path(__file__).resolve().parent


def _env(tree: Path, memory: Path) -> dict[str, str]:
    """A user's environment: bytecode is cached (as after the first run of an install)."""
    env = {**os.environ, "AGENT_HARNESS_MEMORY_DIR": str(memory), "PYTHONPATH": str(tree),
           "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm", "OPENAI_API_KEY": "x",
           "HOME": str(memory.parent)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


class Failed(Exception):
    """A run that did not finish: what it waited for, and the end of what the screen showed."""


_FLOOR = f"print({PROMPT!r})\ntry:\n    input()\nexcept EOFError:\n    pass"
_NOTE = """
import json, os, resource, sys
def note():
    used = resource.getrusage(resource.RUSAGE_SELF)
    with open(os.environ["BENCH_DUMP"], "w") as f:
        json.dump({"cpu": used.ru_utime + used.ru_stime, "modules": len(sys.modules)}, f)
"""
_FLOOR_NOTED = _NOTE + "note()\n" + _FLOOR
# The harness as ``python -m repl`` runs it, noting (above) when the first frame is drawn:
# prompt_toolkit's renderer has written it. The collector is paused first, as the harness's
# own entry point does before its imports (repl/startup.py; a later pause is a no-op).
_DRAWN = _NOTE + """
try:
    from repl import startup
    startup.pause()
except ImportError:
    pass
from prompt_toolkit.renderer import Renderer
render = Renderer.render
def first_render(self, *args, **kwargs):
    render(self, *args, **kwargs)
    Renderer.render = render
    note()
Renderer.render = first_render
from repl.__main__ import main
sys.argv = ["harness", *sys.argv[1:]]
sys.exit(main())
"""
GREETING_END = "Ctrl-D to exit."  # a resume's replay holds "You:" lines before the prompt
NOTICE = "contains the harness's state directory"  # a project directory that holds it


def _screen_tail(child: pexpect.spawn) -> str:
    shown = child.before if isinstance(child.before, str) else ""
    return " ".join(re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", shown).split())[-160:]


def _timed_in_pty(argv: list[str], env: dict[str, str], cwd: Path,
                  drive: Callable[[pexpect.spawn, Callable[[str], None]], float | None]
                  ) -> float:
    """Seconds from spawning ``argv`` in a pseudo-terminal until ``drive(child, waiting)``
    returns (counted instead from the ``time.perf_counter()`` it returns, if any; it calls
    ``waiting(what)`` before each wait, for the failure's message); then Ctrl-D, and the
    process must end. :class:`Failed` if either does not happen within its timeout."""
    start = time.perf_counter()
    child = pexpect.spawn(argv[0], argv[1:], env=env, cwd=str(cwd), encoding="utf-8",
                          timeout=20, dimensions=(40, 160))
    waited = ["the prompt"]

    def waiting(what: str) -> None:
        waited[0] = what

    try:
        since = drive(child, waiting)
        seconds = time.perf_counter() - (start if since is None else since)
        waiting("the process to end after Ctrl-D")
        child.sendcontrol("d")
        child.expect(pexpect.EOF, timeout=60)  # a resumed session saves on the way out
    except (pexpect.TIMEOUT, pexpect.EOF) as exc:
        what = "timed out" if isinstance(exc, pexpect.TIMEOUT) else "the process ended"
        raise Failed(f"{what} waiting for {waited[0]}; the screen showed: "
                     f"...{_screen_tail(child)!r}") from None
    finally:
        child.close(force=True)
    if child.exitstatus:
        raise Failed(f"exit status {child.exitstatus}: ...{_screen_tail(child)!r}")
    return seconds


def to_prompt(argv: list[str], env: dict[str, str], cwd: Path,
              greeting: str | None = GREETING_END) -> float:
    """Seconds from spawning ``argv`` in a pseudo-terminal until the prompt shows (after the
    ``greeting``'s last line); then Ctrl-D (:func:`_timed_in_pty`)."""

    def drive(child: pexpect.spawn, waiting: Callable[[str], None]) -> None:
        waiting("the prompt")
        if greeting is not None:
            child.expect_exact(greeting)
        child.expect_exact(PROMPT)

    return _timed_in_pty(argv, env, cwd, drive)


def noted(argv: list[str], env: dict[str, str], cwd: Path, dump: Path,
          greeting: str | None = GREETING_END) -> tuple[float, int]:
    """The CPU seconds and the modules ``argv`` (a script of :data:`_NOTE`'s) noted on its
    way to the prompt (:func:`to_prompt`)."""
    dump.unlink(missing_ok=True)
    to_prompt(argv, {**env, "BENCH_DUMP": str(dump)}, cwd, greeting)
    try:
        figures = json.loads(dump.read_text())
    except (OSError, ValueError):
        raise Failed("the CPU time at the first draw was not noted") from None
    return figures["cpu"], figures["modules"]


def to_answer(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    """Seconds from spawning ``argv`` in a pseudo-terminal until the answer to a message sent
    at the first prompt is on the screen and the prompt is back; then Ctrl-D."""

    def drive(child: pexpect.spawn, waiting: Callable[[str], None]) -> None:
        waiting("the prompt")
        child.expect_exact(GREETING_END)
        child.expect_exact(PROMPT)
        child.send("ping\r")
        waiting("the answer")
        child.expect_exact(ANSWER)
        child.expect_exact(PROMPT)

    return _timed_in_pty(argv, env, cwd, drive)


def after_notice(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    """Seconds from sending a message the moment the start's notice (``cwd`` holds the
    memory directory) is on the screen above the prompt until its answer is on the screen
    and the prompt is back; then Ctrl-D."""

    def drive(child: pexpect.spawn, waiting: Callable[[str], None]) -> float:
        waiting("the prompt")
        child.expect_exact(GREETING_END)
        child.expect_exact(PROMPT)
        waiting("the notice")
        child.expect_exact(NOTICE)
        sent = time.perf_counter()
        child.send("ping\r")
        waiting("the answer")
        child.expect_exact(ANSWER)
        child.expect_exact(PROMPT)
        return sent

    return _timed_in_pty(argv, env, cwd, drive)


def whole_process(argv: list[str], env: dict[str, str], cwd: Path,
                  lines: int = 0) -> float:
    """Seconds of the whole process; ``lines``: how many lines it must print at least (a
    listing that shows nothing costs nothing)."""
    start = time.perf_counter()
    try:
        done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True,
                              timeout=60)
    except subprocess.TimeoutExpired:
        raise Failed(f"{' '.join(argv[1:])}: timed out after 60 s") from None
    seconds = time.perf_counter() - start
    if done.returncode:
        raise Failed(f"{' '.join(argv[1:])} failed ({done.returncode}): "
                     f"{done.stderr.strip()[-300:]}")
    if len(done.stdout.splitlines()) < lines:
        raise Failed(f"{' '.join(argv[1:])} printed {len(done.stdout.splitlines())} lines, "
                     f"not {lines}")
    return seconds


_POPULATE = """
import sys
from actors.store import SqliteStore
store = SqliteStore(sys.argv[1])
for i in range(int(sys.argv[2])):
    store.create_session(title=f"Session {i}", project_root=sys.argv[3], messages=[
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


_IN_PROCESS = """
import json, sys, time
from pathlib import Path
import anyio
from actors.model import _body
from actors.runtime.supervisor import Supervisor
from actors.store import SqliteStore, _rows
from actors.testing.settings import settings_for

counts = {"parses": 0, "encodes": 0}
real_loader, real_wire = _rows.json_loader, _body._for_wire

def loader(session_id, hint):
    loads = real_loader(session_id, hint)
    def counting(body, what):
        counts["parses"] += what.startswith("context message")
        return loads(body, what)
    return counting

def wire(message):
    counts["encodes"] += 1
    return real_wire(message)

_rows.json_loader, _body._for_wire = loader, wire
memory, sid, project, url = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), sys.argv[4]
budget = {"max_context_tokens": int(sys.argv[5])} if len(sys.argv) > 5 else {}

async def main():
    settings = settings_for(memory.parent, url, memory_dir=memory, sandbox_dir=project,
                            **budget)
    start = time.perf_counter()
    async with Supervisor.open(settings, SqliteStore(memory), resume=sid) as supervisor:
        opened, at_open = time.perf_counter(), dict(counts)
        assert (await supervisor.run_turn("hi")).ok
        turned = time.perf_counter()
    print(json.dumps({"resume": opened - start, "turn": turned - opened,
                      "open_parses": at_open["parses"],
                      "turn_parses": counts["parses"] - at_open["parses"],
                      "turn_encodes": counts["encodes"] - at_open["encodes"]}))

anyio.run(main)
"""


def in_process(tree: Path, memory: Path, sid: str, project: Path, url: str,
               budget: int | None) -> dict[str, Any]:
    """A resume and its first turn in one process of ``tree``'s code (see the module)."""
    over = [] if budget is None else [str(budget)]
    done = subprocess.run(
        [sys.executable, "-c", _IN_PROCESS, str(memory), sid, str(project), url, *over],
        env={**os.environ, "PYTHONPATH": str(tree)}, cwd=project, timeout=120,
        capture_output=True, text=True)
    if done.returncode:
        raise Failed(f"in process: {done.stderr.strip()[-300:]}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def print_turn(argv: list[str], env: dict[str, str], cwd: Path,
               rss_file: Path) -> tuple[float, int]:
    """Seconds and peak RSS (KB) of the whole process ``argv`` under ``/usr/bin/time``."""
    seconds = whole_process(["/usr/bin/time", "-o", str(rss_file), "-f", "%M", *argv], env, cwd)
    return seconds, int(rss_file.read_text().split()[-1])


def populate(tree: Path, memory: Path, project: Path) -> None:
    """A store of :data:`SESSIONS` sessions of ``project``, written by ``tree``'s own code
    (its schema)."""
    subprocess.run([sys.executable, "-c", _POPULATE, str(memory), str(SESSIONS),
                    str(project.resolve())],
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
        str(t): {key: [] for key in (
            "prompt", "cpu", "modules", "first", "answer", "notice", "list", "resume", "rss", "p",
            "p_rss", "in_resume", "in_turn", "p_big", "p_rss_big", "in_resume_big",
            "in_turn_big")} for t in trees}
    counted: dict[str, dict[str, int]] = {}
    floor: list[float] = []
    floor_cpu: list[float] = []
    failures: list[str] = []
    names = ["this tree" if t == REPO else t.name for t in trees]
    load_before = os.getloadavg()[0]

    def take(run: int, label: str, figure: str, measure: Callable[[], Any]) -> Any:
        """``measure()``, or None with a failure line (a run that timed out is a figure
        missing, not a traceback)."""
        try:
            return measure()
        except Failed as failure:
            failures.append(f"run {run + 1}, {label}, {figure}: {failure}")
            print(f"  FAILED: {failures[-1]}", file=sys.stderr)
            return None
    with tempfile.TemporaryDirectory(prefix="start-bench-") as tmp, \
            ScriptedServer([Reply(ANSWER)] * 10_000) as server:
        work = Path(tmp)
        listed = {}
        for n, tree in enumerate(trees):
            listed[tree] = work / f"listed-{n}" / "memory"
            listed[tree].mkdir(parents=True)
            print(f"setup: {SESSIONS:,} sessions ({tree})", file=sys.stderr)
            populate(tree, listed[tree], work)  # sessions of the directory it is listed in
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

            seconds = take(run, "python alone", "to the prompt", partial(
                to_prompt, [python, "-c", _FLOOR], dict(os.environ), work, greeting=None))
            if run >= 0 and seconds is not None:
                floor.append(seconds)
            got = take(run, "python alone", "CPU to the prompt", partial(
                noted, [python, "-c", _FLOOR_NOTED], dict(os.environ), work, work / "note",
                greeting=None))
            if run >= 0 and got is not None:
                floor_cpu.append(got[0])
            for tree in trees:
                label = names[trees.index(tree)]
                repl = [python, "-m", "repl", "--base-url", server.base_url]
                kept = work / f"kept-{trees.index(tree)}" / "memory"  # made by the warm-up
                kept.mkdir(parents=True, exist_ok=True)
                prompt = take(run, label, "REPL to the first prompt", partial(
                    to_prompt, repl, _env(tree, kept), project))
                got = take(run, label, "CPU to the first prompt", partial(
                    noted, [python, "-c", _DRAWN, "--base-url", server.base_url],
                    _env(tree, kept), project, work / "note"))
                if run >= 0 and got is not None:
                    samples[str(tree)]["cpu"].append(got[0])
                    samples[str(tree)]["modules"].append(got[1])
                fresh = work / f"fresh-{run}-{trees.index(tree)}" / "memory"
                fresh.mkdir(parents=True)
                first = take(run, label, "REPL to the first prompt, first start", partial(
                    to_prompt, repl, _env(tree, fresh), project))
                answer = take(run, label, "REPL to its first answer", partial(
                    to_answer, repl, _env(tree, kept), project))
                notice = take(run, label, "a message sent as a notice shows", partial(
                    after_notice, repl, _env(tree, kept), work))  # work holds ``kept``
                listing = take(run, label, "--list-sessions", partial(
                    whole_process, [python, "-m", "repl", "--list-sessions"],
                    _env(tree, listed[tree]), work, lines=SESSIONS))
                if run >= 0:
                    if prompt is not None:
                        samples[str(tree)]["prompt"].append(prompt)
                    if first is not None:
                        samples[str(tree)]["first"].append(first)
                    if answer is not None:
                        samples[str(tree)]["answer"].append(answer)
                    if notice is not None:
                        samples[str(tree)]["notice"].append(notice)
                    if listing is not None:
                        samples[str(tree)]["list"].append(listing)
                if tree in big and run in (-1, 0, 1, 2):  # a few: each rewrites the session
                    memory, sid = big[tree]
                    got = take(run, label, "--resume", partial(
                        resumed,
                        [python, "-m", "repl", "--base-url", server.base_url, "--resume", sid],
                        _env(tree, memory), project, work / "rss"))
                    if run >= 0 and got is not None:
                        samples[str(tree)]["resume"].append(got[0])
                        samples[str(tree)]["rss"].append(got[1] / 1000)
                    for budget, tag in ((None, ""), (BIG_BUDGET, "_big")):
                        # a server of its own: it keeps each (22 MB) request it was sent
                        with ScriptedServer([Reply("hi")] * 4) as turn_server:
                            # a copy each time: a compaction rewrites the session
                            scratch = work / "scratch" / "memory"
                            shutil.rmtree(scratch.parent, ignore_errors=True)
                            shutil.copytree(memory, scratch)
                            over = [] if budget is None else ["--max-context-tokens",
                                                              str(budget)]
                            got = take(run, label, "--resume -p" + tag, partial(
                                print_turn, [python, "-m", "repl", "--base-url",
                                             turn_server.base_url, "--resume", sid, "-p", "hi",
                                             *over],
                                _env(tree, scratch), project, work / "rss"))
                            shutil.rmtree(scratch.parent, ignore_errors=True)
                            shutil.copytree(memory, scratch)
                            if run >= 0 and got is not None:
                                samples[str(tree)]["p" + tag].append(got[0])
                                samples[str(tree)]["p_rss" + tag].append(got[1] / 1000)
                            figures = take(run, label, "in process" + tag, partial(
                                in_process, tree, scratch, sid, project, turn_server.base_url,
                                budget))
                        if run >= 0 and figures is not None:
                            samples[str(tree)]["in_resume" + tag].append(figures["resume"])
                            samples[str(tree)]["in_turn" + tag].append(figures["turn"])
                            counted.setdefault(str(tree), {}).update(
                                {k + tag: v for k, v in figures.items()
                                 if k.endswith(("parses", "encodes"))})
    load_after = os.getloadavg()[0]
    med = {t: {k: (1 if "rss" in k or k == "modules" else 1000) * statistics.median(v)
               for k, v in s.items() if v}
           for t, s in samples.items()}

    def cell(tree: Path, key: str, unit: str) -> str:
        value = med[str(tree)].get(key)
        return "failed" if value is None else f"{value:.0f} {unit}".rstrip()

    print(f"| figure (median of {args.runs}) | {' | '.join(names)} | python alone |")
    print("|---|" + "---:|" * (len(trees) + 1))
    alone = f"{1000 * statistics.median(floor):.0f} ms" if floor else "failed"
    print("| REPL to the first prompt | " + " | ".join(cell(t, "prompt", "ms") for t in trees)
          + f" | {alone} |")
    alone_cpu = f"{1000 * statistics.median(floor_cpu):.0f} ms" if floor_cpu else "failed"
    print("| REPL to the first prompt: CPU time at its first draw | "
          + " | ".join(cell(t, "cpu", "ms") for t in trees) + f" | {alone_cpu} |")
    print("| REPL to the first prompt: modules loaded at its first draw | "
          + " | ".join(cell(t, "modules", "") for t in trees) + " | |")
    print("| REPL to the first prompt, first start (new memory directory) | "
          + " | ".join(cell(t, "first", "ms") for t in trees) + " | |")
    print("| REPL to its first answer (a message sent at the prompt) | "
          + " | ".join(cell(t, "answer", "ms") for t in trees) + " | |")
    print("| REPL: a message sent as a notice shows above the prompt, to its answer | "
          + " | ".join(cell(t, "notice", "ms") for t in trees) + " | |")
    print(f"| --list-sessions, {SESSIONS:,} sessions (whole process) | "
          + " | ".join(cell(t, "list", "ms") for t in trees) + " | |")
    if args.resume_messages:
        print(f"| --resume of {args.resume_messages:,} messages: to the prompt (median of 3) | "
              + " | ".join(cell(t, "resume", "ms") for t in trees) + " | |")
        print(f"| --resume of {args.resume_messages:,} messages: peak RSS | "
              + " | ".join(cell(t, "rss", "MB") for t in trees) + " | |")
        for tag, how in (("", "(a compaction: over the default budget)"),
                         ("_big", f"with --max-context-tokens {BIG_BUDGET:,} (no compaction)")):
            print(f"| --resume ID -p hi {how}: whole process | "
                  + " | ".join(cell(t, "p" + tag, "ms") for t in trees) + " | |")
            print(f"| --resume ID -p hi {how}: peak RSS | "
                  + " | ".join(cell(t, "p_rss" + tag, "MB") for t in trees) + " | |")
            print(f"| in process {how}: the resume | "
                  + " | ".join(cell(t, "in_resume" + tag, "ms") for t in trees) + " | |")
            print(f"| in process {how}: its first turn | "
                  + " | ".join(cell(t, "in_turn" + tag, "ms") for t in trees) + " | |")
            for key, what in (("open_parses", "rows parsed by the resume"),
                              ("turn_parses", "rows parsed by the first turn"),
                              ("turn_encodes", "messages encoded for its requests")):
                print(f"| in process {how}: {what} | " + " | ".join(
                    str(counted.get(str(t), {}).get(key + tag, "failed")) for t in trees)
                      + " | |")
    print(f"\nload average: {load_before:.1f} at the start, {load_after:.1f} at the end "
          "(2 cores)")
    for failure in failures:
        print(f"FAILED: {failure}")
    if args.json:
        print(json.dumps({"median_ms": med, "counts": counted,
                          "floor_ms": 1000 * statistics.median(floor) if floor else None,
                          "floor_cpu_ms": (1000 * statistics.median(floor_cpu) if floor_cpu
                                           else None),
                          "failures": failures}))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
