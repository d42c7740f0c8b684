"""The crash-torture machinery: SIGKILL ``harness -p`` at random moments of a long tool
conversation and check after every kill that nothing was lost.

``benchmarks/torture.py`` is its command line (figures for a long run);
``tests/e2e/test_torture.py`` runs it small on every CI run and tests its checks. A scripted
OpenAI-compatible server (:mod:`actors.testing.scripted_server`, real HTTP on loopback) plays
:class:`TaskModel`: a model that works through an endless task, each request answered (streamed
with a small random delay between chunks) by one to three tool calls (``run_bash`` commands that
append a unique token to ``ledger.txt`` in the project directory, sometimes a ``write_file``),
and every :data:`TEXT_EVERY`-th request by a plain answer that ends the turn. Summary requests
of the compactor get a short summary.

:func:`run_torture` starts ``python -m repl -p "continue the task (run I)" --resume ID`` (the
first run without ``--resume``) as a real subprocess, lets it run for a random (seeded) moment
(:func:`draw_plan`), sends it SIGKILL and reaps it. A run that ends by itself first is counted
and the loop goes on. ``run_bash`` commands run in their own process group, which a kill -9 of
the harness cannot clean up: leftovers are found by their working directory in ``/proc`` and
killed between iterations. After every kill the store is opened and checked; see
:class:`Figures` for what is counted. After the loop one more resume must run to the end of its
turn undisturbed. The harness runs are started with ``PYTHONPATH`` set to the source tree of
this package, so they run the same code as the caller.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

from actors.core.budget import CHARS_PER_TOKEN, estimate_messages
from actors.core.carried import SUMMARY_OPEN
from actors.core.compaction import summary_message
from actors.core.messages import INTERRUPTED_NOTICE, NOT_STARTED_NOTICE, tool_calls_of
from actors.core.prompts import system_prompt
from actors.runtime.compactor import SUMMARY_PROMPT
from actors.store import SessionStore
from actors.testing.scripted_server import (
    Reply,
    ScriptedServer,
    Step,
    ToolCall,
    _chunks,
    tool_pairing_errors,
)
from actors.tools import tool_schemas

SOURCE_ROOT = Path(__file__).resolve().parents[2]  # the directory holding ``actors/``

JSON = dict[str, Any]

DEFAULT_KILLS = 200
DEFAULT_SEED = 1
TEXT_EVERY = 5  # every 5th model request is answered with text: the turn ends
LEDGER = "ledger.txt"
PROMPT = "continue the task"
CONTEXT_ROOM = 2000  # tokens for the conversation: small, so that long runs compact too
SESSION_LINE_TIMEOUT = 60.0  # seconds for the first run to print `Session: ID`
FINAL_RUN_TIMEOUT = 120.0
BACKGROUND_JOB_S = 30  # a job left in the background by some commands
SURVIVOR_WAIT = 2.0  # seconds after a kill for the command's group to be gone
LOSS_FIGURES = (
    "survivors",
    "sessions_unreadable",
    "checkpoints_lost",
    "transcripts_shrunk",
    "unpaired_tool_calls_sent",
    "tools_replayed",
    "ran_but_reported_not_executed",
    "reported_done_but_never_ran",
    "failed_runs",
)


# ------------------------------------------------------------------------------------ figures


@dataclass
class Figures:
    """What a torture run counts. Every name in :data:`LOSS_FIGURES` must be 0.

    * ``kills``: SIGKILLs delivered while the harness was running (exit status -9).
    * ``kills_during_run_bash``: kills while a ``run_bash`` command was running (a process
      other than the harness working in the project); ``processes_at_kill`` counts those
      processes (a command, its background jobs, the guardian).
    * ``survivors``: processes of a command still running :data:`SURVIVOR_WAIT` seconds
      after the harness was killed (the guardian in the command's group must have ended
      them); the loop kills them so the run can go on.
    * ``resumes``: ``--resume`` runs that got as far as printing ``Session: ID`` (the lease was
      taken, the session loaded and recovered).
    * ``sessions_unreadable``: checks where ``load_session`` raised or
      ``PRAGMA integrity_check`` was not ``ok``.
    * ``checkpoints_lost``: requests received by the endpoint whose messages are not all in
      the saved transcript afterwards. Precisely: the non-system messages of the request, in
      order, must be a subsequence of the transcript (compared as canonical JSON); a
      compaction summary block (which lives in the context only) must instead equal the
      summary of a compaction recorded in the store; for a compactor's summary request the
      same holds for the messages it carries as JSON data.
    * ``transcripts_shrunk``: checks where the transcript was shorter than at the check before.
    * ``unpaired_tool_calls_sent``: over all requests received, the problems found by
      ``tool_pairing_errors`` (a tool call without exactly one result, an orphan result).
    * ``tools_replayed``: ledger tokens that appear more than once in ``ledger.txt``.
    * ``ran_but_reported_not_executed``: ``run_bash`` calls answered "Not executed ... Safe to
      retry" whose token is in the ledger (a retry would repeat the side effect).
    * ``reported_done_but_never_ran``: ``run_bash`` calls answered with a real result (exit
      code 0) whose token is not in the ledger.
    * ``failed_runs``: runs that ended by themselves with a non-zero status or a traceback,
      plus the final undisturbed run if it did not answer.
    """

    iterations: int = 0
    kills: int = 0
    kills_during_run_bash: int = 0
    processes_at_kill: int = 0
    survivors: int = 0
    resumes: int = 0
    turns_finished: int = 0
    sessions_unreadable: int = 0
    checkpoints_lost: int = 0
    transcripts_shrunk: int = 0
    unpaired_tool_calls_sent: int = 0
    tools_replayed: int = 0
    ran_but_reported_not_executed: int = 0
    reported_done_but_never_ran: int = 0
    failed_runs: int = 0
    requests_served: int = 0
    compaction_requests: int = 0
    compactions_saved: int = 0
    tool_calls_requested: int = 0
    tool_calls_executed: int = 0
    recovered_outcome_unknown: int = 0
    recovered_not_executed: int = 0
    leftover_processes_killed: int = 0
    transcript_messages: int = 0
    kills_by_phase: dict[str, int] = field(default_factory=dict)
    server_errors: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0
    seed: int = DEFAULT_SEED
    session_id: str = ""

    @property
    def losses(self) -> int:
        """The sum of the loss figures (0 for a good run)."""
        return sum(int(getattr(self, name)) for name in LOSS_FIGURES)

    @property
    def ok(self) -> bool:
        """True when no loss was found (what the exit status reports)."""
        return self.losses == 0

    def to_json(self) -> JSON:
        """All figures as one JSON-ready object, ``ok`` included."""
        return {**asdict(self), "ok": self.ok}


# ---------------------------------------------------------------------------------- the model


def canonical(message: JSON) -> str:
    """A message as comparable text (key order does not matter)."""
    return json.dumps(message, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def is_summary_request(body: JSON) -> bool:
    """True for the compactor's summary request (its own system prompt, no tools)."""
    messages = body.get("messages") or []
    return bool(messages) and messages[0].get("content") == SUMMARY_PROMPT


def token_of(call_id: str) -> str:
    """The ledger token written by the ``run_bash`` call ``call_<request>_<n>``."""
    return "step-" + call_id.removeprefix("call_").replace("_", "-")


class TaskModel:
    """The scripted model: a responder for :class:`ScriptedServer` (called from its threads).

    Request ``n`` (counted from 0 over the whole run) is answered from ``Random(f"{seed}/{n}")``
    and the request's kind alone, so the replies are reproducible and every tool call id
    (``call_<n>_<j>``) and ledger token (``step-<n>-<j>``) is unique over the run.
    """

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._cond = threading.Condition()
        self.tool_calls = 0
        self.summaries = 0
        self._streams: list[tuple[float, float]] = []  # (start, estimated end) per reply
        self._summary_requests: set[int] = set()

    @property
    def replies(self) -> int:
        """How many requests were answered so far."""
        with self._cond:
            return len(self._streams)

    def __call__(self, body: JSON) -> Step:
        with self._cond:
            n = len(self._streams)
            self._streams.append((math.inf, math.inf))  # reserved; set below
        rng = random.Random(f"{self.seed}/{n}")
        delay = rng.uniform(0.002, 0.05)
        calls: list[ToolCall] = []
        if is_summary_request(body):
            reply = Reply(f"Summary {n}: the task went on step by step; the ledger grows.",
                          chunk_delay=delay)
        elif n % TEXT_EVERY == TEXT_EVERY - 1:
            reply = Reply(f"Request {n}: this part of the task is done.", chunk_delay=delay)
        else:
            calls = [self._call(rng, n, j) for j in range(rng.randint(1, 3))]
            reply = Reply(f"Step {n}." if rng.random() < 0.3 else "", calls, chunk_delay=delay)
        chunks = sum(1 for _ in _chunks(reply, body))
        start = time.monotonic()
        with self._cond:
            self.tool_calls += len(calls)
            if is_summary_request(body):
                self.summaries += 1
                self._summary_requests.add(n)
            self._streams[n] = (start, start + delay * max(chunks - 1, 0))
            self._cond.notify_all()
        return reply

    def stream_end(self, n: int, timeout: float) -> float | None:
        """When the reply to request ``n`` will have been streamed (``time.monotonic``), or
        None if that request did not come within ``timeout`` seconds."""
        with self._cond:
            if not self._cond.wait_for(
                lambda: len(self._streams) > n and self._streams[n][0] < math.inf, timeout
            ):
                return None
            return self._streams[n][1]

    @staticmethod
    def _call(rng: random.Random, n: int, j: int) -> ToolCall:
        call_id = f"call_{n}_{j}"
        if j > 0 and rng.random() < 0.25:
            return ToolCall("write_file", {"path": "scratch.txt",
                                           "content": f"written by {call_id}\n"}, id=call_id)
        pause = rng.choice(("0.01", "0.03", "0.05", "0.08", "0.2"))
        echo = f"echo {token_of(call_id)} >> {LEDGER}"
        command = f"{echo}; sleep {pause}" if rng.random() < 0.5 else f"sleep {pause}; {echo}"
        if rng.random() < 0.4:  # a background job that would outlive a killed harness
            command = f"sleep {BACKGROUND_JOB_S} & {command}"
        return ToolCall("run_bash", {"command": command}, id=call_id)

    def streaming_now(self) -> str | None:
        """What is being streamed at this moment (by the chunk delays): "stream" for a reply
        of the task, "summary" for a compaction summary, None for nothing."""
        now = time.monotonic()
        with self._cond:
            first = max(0, len(self._streams) - 3)
            for n in range(first, len(self._streams)):
                start, end = self._streams[n]
                if start <= now <= end:
                    return "summary" if n in self._summary_requests else "stream"
        return None


# ------------------------------------------------------------------------------- the checks


def expand(message: JSON) -> list[JSON]:
    """What a request message shows of the session: itself, or for a summary request's
    JSON data, the messages carried in it."""
    content = message.get("content")
    if message.get("role") == "user" and isinstance(content, str) and content.startswith("["):
        with contextlib.suppress(ValueError):
            data = json.loads(content)
            if isinstance(data, list) and all(isinstance(m, dict) for m in data):
                return data
    return [message]


def missing_from_transcript(
    request: JSON, transcript: Sequence[JSON], compaction_summaries: Sequence[str],
    *, unsaved_tail: bool = False,
) -> str | None:
    """Why ``request`` shows something the store does not hold (None when it does not).

    ``unsaved_tail``: the request was the last of a run killed before its answer was used.
    A request goes out while the checkpoint of what it adds commits (its answer waits for
    that checkpoint), so the messages it ends with may be missing, none of them saved."""
    summaries = {canonical(summary_message(s)) for s in compaction_summaries}
    sent = [m for m in request.get("messages") or [] if m.get("role") != "system"]
    if is_summary_request(request):
        sent = [carried for m in sent for carried in expand(m)]
    saved = [canonical(m) for m in transcript]
    at = 0
    for index, message in enumerate(sent):
        text = canonical(message)
        content = message.get("content")
        if isinstance(content, str) and content.startswith(SUMMARY_OPEN):
            if text not in summaries:
                return f"message {index}: a summary block that no saved compaction produced"
            continue
        start = at
        while at < len(saved) and saved[at] != text:
            at += 1
        if at == len(saved):
            rest = {canonical(m) for m in sent[index:]}
            if unsaved_tail and not rest.intersection(saved[start:]):
                return None  # the tail its own checkpoint was still writing
            return f"message {index} ({message.get('role')}) not in the transcript: {text[:300]}"
        at += 1
    return None


def fixed_context_tokens(project: Path) -> int:
    """What every request of the harness costs before any conversation: the tool schemas and
    the system prompt, estimated at four characters per token as the harness estimates."""
    schemas = len(json.dumps(tool_schemas())) // CHARS_PER_TOKEN
    system = {"role": "system", "content": system_prompt(project, {})}
    return schemas + estimate_messages([system])


def integrity_problem(db_path: Path) -> str | None:
    """None when ``PRAGMA integrity_check`` says ok, else what it said."""
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        rows = [r[0] for r in conn.execute("PRAGMA integrity_check")]
    finally:
        conn.close()
    return None if rows == ["ok"] else "; ".join(map(str, rows))[:500]


def load(memory_dir: Path, session_id: str) -> JSON:
    """The session's record, from a store opened for this check only."""
    store = SessionStore(memory_dir)
    try:
        return dict(store.load_session(session_id))
    finally:
        store.close()


# ------------------------------------------------------------------------------- processes


def _project_processes(project: Path) -> list[int]:
    """Pids of live processes whose working directory is ``project`` (not this process)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if Path(os.readlink(f"/proc/{entry}/cwd")) == project:
                found.append(int(entry))
    return found


def wait_for_survivors(project: Path, timeout: float = SURVIVOR_WAIT) -> list[int]:
    """The processes still working in ``project`` after ``timeout`` seconds (sooner when
    none is left): after a kill -9 of the harness, none may remain."""
    deadline = time.monotonic() + timeout
    while (found := _project_processes(project)) and time.monotonic() < deadline:
        time.sleep(0.01)
    return found


def kill_leftovers(project: Path) -> int:
    """SIGKILL every process group still working in ``project``; wait until they are gone.

    ``run_bash`` commands lead their own process group, so killing the group takes the
    command's children too. Returns how many processes were found.
    """
    own_group = os.getpgrp()
    found = _project_processes(project)
    for pid in found:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            pgid = os.getpgid(pid)
            if pgid != own_group:
                os.killpg(pgid, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while _project_processes(project) and time.monotonic() < deadline:
        time.sleep(0.01)  # orphans are reaped by init; a killed zombie has no cwd
    return len(found)


def _is_leader(pid: int) -> bool:
    """Whether ``pid`` leads its process group (a run_bash command: bash, started with
    ``start_new_session``)."""
    try:
        return os.getpgid(pid) == pid
    except OSError:
        return False


def session_line(err_path: Path) -> str | None:
    """The session id from the ``Session: ID`` line of a run's stderr, if printed yet."""
    with contextlib.suppress(OSError), err_path.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith("Session: "):
                return line.split()[1]
    return None


@dataclass
class KillPlan:
    """When to kill one run, counted from the moment it starts.

    ``clock``: after ``delay`` seconds alone (start-up, resume recovery, a first request).
    ``bash``: ``delay`` seconds after the ``count``-th new ``run_bash`` command was seen
    running (inside the command, its background jobs alive).
    ``request``: ``delay`` seconds after the ``count``-th new model request arrived (mostly
    inside its streamed reply). ``stream-end``: ``delay`` seconds after the ``count``-th new
    reply was streamed to its end (the checkpoint of the assistant message, the write-ahead
    record, the start of the tools). ``tool``: ``delay`` seconds after ``count`` new lines
    reached the ledger (inside a command, or the results' checkpoint after it).
    """

    kind: str
    count: int
    delay: float

    def __str__(self) -> str:
        return f"{self.kind}:{self.count}+{self.delay:.2f}s"


def draw_plan(rng: random.Random) -> KillPlan:
    """A seeded kill moment (see :class:`KillPlan`)."""
    kind = rng.choices(("clock", "request", "stream-end", "tool", "bash"),
                       weights=(3, 2, 3, 2, 3))[0]
    if kind == "clock":
        return KillPlan(kind, 0, rng.uniform(0.05, 1.5))
    if kind == "bash":
        return KillPlan(kind, rng.randint(1, 2), rng.uniform(0.0, 0.05))
    if kind == "request":
        return KillPlan(kind, rng.randint(1, 3), rng.uniform(0.0, 0.15))
    if kind == "stream-end":
        return KillPlan(kind, rng.randint(1, 2), rng.uniform(0.0, 0.03))
    return KillPlan(kind, rng.randint(1, 3), rng.uniform(0.0, 0.1))


def ledger_lines(project: Path) -> int:
    """How many lines the ledger has (0 before the first)."""
    try:
        return (project / LEDGER).read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def _alive(proc: subprocess.Popen[bytes]) -> bool:
    """Whether ``proc`` is still running."""
    return proc.poll() is None


def sleep_until(proc: subprocess.Popen[bytes], moment: float) -> None:
    """Sleep until ``moment`` (``time.monotonic``) or until ``proc`` exits."""
    while _alive(proc) and time.monotonic() < moment:
        time.sleep(min(0.005, max(0.0, moment - time.monotonic())))


# --------------------------------------------------------------------------------- the loop


class Torture:
    """One torture run: a server, a project, a memory dir, and the figures."""

    def __init__(self, workdir: Path, seed: int, backends: Sequence[str],
                 context_room: int, log: TextIO | None) -> None:
        self.workdir = workdir
        self.project = (workdir / "project").resolve()
        self.memory_dir = workdir / "memory"
        self.logs = workdir / "logs"
        for path in (self.project, self.memory_dir, self.logs):
            path.mkdir(parents=True, exist_ok=True)
        self.rng = random.Random(seed)
        self.backends = list(backends)
        self.max_context_tokens = fixed_context_tokens(self.project) + context_room
        self.log = log
        self.model = TaskModel(seed)
        self.figures = Figures(seed=seed)
        self.session_id: str | None = None
        self.checked_requests = 0
        self.transcript_len = 0
        self.run_label = ""

    def say(self, text: str) -> None:
        """A progress line (to ``log``, if any)."""
        if self.log is not None:
            print(text, file=self.log, flush=True)

    def problem(self, text: str) -> None:
        """Record what a loss figure counted, for the report."""
        self.figures.problems.append(text)
        self.say(f"PROBLEM: {text}")

    def argv(self, server: ScriptedServer, prompt: str) -> list[str]:
        """The command line of one harness run (resuming once the session id is known)."""
        argv = [sys.executable, "-m", "repl", "-p", prompt, "--base-url", server.base_url,
                "--mode", "dangerouslySkipPermissions", "--memory-dir", str(self.memory_dir),
                "--llm-timeout", "30", "--max-tool-calls", "1000000",
                "--max-context-tokens", str(self.max_context_tokens)]
        if self.session_id:
            argv += ["--resume", self.session_id]
        return argv

    @contextlib.contextmanager
    def start(self, server: ScriptedServer, name: str, prompt: str,
              backend: str) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
        """Start the harness with stdout/stderr to files; always reaped on the way out."""
        env = {**os.environ, "PYTHONPATH": str(SOURCE_ROOT), "OPENAI_API_KEY": "test",
               "AGENT_HARNESS_BACKEND": backend}
        env.pop("OPENAI_BASE_URL", None)
        err_path = self.logs / f"{name}.err"
        with (self.logs / f"{name}.out").open("wb") as out, err_path.open("wb") as err, \
                subprocess.Popen(self.argv(server, prompt), cwd=self.project, env=env,
                                 stdin=subprocess.DEVNULL, stdout=out, stderr=err) as proc:
            try:
                yield proc, err_path
            finally:
                if proc.poll() is None:
                    proc.kill()
                proc.wait()

    def iteration(self, server: ScriptedServer, i: int) -> None:
        """Run ``i``: start the harness, kill it at the planned moment, clean up, check."""
        plan = draw_plan(self.rng)
        backend = self.rng.choice(self.backends)
        resuming = self.session_id is not None
        self.run_label = f"run-{i:04d}"
        prompt = f"{PROMPT} (run {i})"  # unique, so that each user message is told apart
        with self.start(server, self.run_label, prompt, backend) as (proc, err_path):
            if not resuming:  # the first run must tell us the session id before it dies
                deadline = time.monotonic() + SESSION_LINE_TIMEOUT
                while session_line(err_path) is None and proc.poll() is None:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"no `Session:` line from the first run ({err_path})")
                    time.sleep(0.005)
            self.wait_for_moment(plan, proc)
            phase = self.phase(proc, err_path)
            at_kill = [pid for pid in _project_processes(self.project) if pid != proc.pid]
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
            code = proc.wait()
        survivors = wait_for_survivors(self.project) if code == -signal.SIGKILL else []
        self.figures.leftover_processes_killed += kill_leftovers(self.project)
        self.figures.iterations += 1
        sid = session_line(err_path)
        if code == -signal.SIGKILL:
            self.figures.kills += 1
            self.figures.kills_by_phase[phase] = self.figures.kills_by_phase.get(phase, 0) + 1
            if at_kill:
                self.figures.kills_during_run_bash += 1
                self.figures.processes_at_kill += len(at_kill)
            if survivors:
                self.figures.survivors += len(survivors)
                self.problem(f"{self.run_label}: {len(survivors)} processes of a command "
                             f"still running {SURVIVOR_WAIT:g} s after the kill")
        else:
            self.ended_by_itself(code, err_path)
        if resuming and sid == self.session_id:
            self.figures.resumes += 1
        self.session_id = self.session_id or sid
        self.say(f"run {i:4d} [{backend:7}] {plan!s:21} "
                 f"exit={code:3d} phase={phase if code == -signal.SIGKILL else '-':9} "
                 f"requests={len(server.requests)}")
        time.sleep(0.05)  # a request the dead process had fully sent still gets recorded
        self.check(server, killed=code == -signal.SIGKILL)

    def wait_for_moment(self, plan: KillPlan, proc: subprocess.Popen[bytes]) -> None:
        """Return at the kill moment of ``plan`` (or as soon as the run has exited)."""
        start = time.monotonic()
        if plan.kind == "clock":
            sleep_until(proc, start + plan.delay)
            return
        if plan.kind == "bash":
            seen: set[int] = set()
            while _alive(proc) and len(seen) < plan.count:
                seen.update(pid for pid in _project_processes(self.project)
                            if pid != proc.pid and _is_leader(pid))
                time.sleep(0.002)
            sleep_until(proc, time.monotonic() + plan.delay)
            return
        if plan.kind == "tool":
            target = ledger_lines(self.project) + plan.count
            while _alive(proc) and ledger_lines(self.project) < target:
                time.sleep(0.002)
            sleep_until(proc, time.monotonic() + plan.delay)
            return
        index = self.model.replies + plan.count - 1
        end = None
        while _alive(proc) and end is None:
            end = self.model.stream_end(index, timeout=0.02)
        if end is not None:
            moment = time.monotonic() if plan.kind == "request" else end
            sleep_until(proc, moment + plan.delay)

    def phase(self, proc: subprocess.Popen[bytes], err_path: Path) -> str:
        """Where the run is right now: a rough label for the kill statistics."""
        if proc.poll() is not None:
            return "exited"
        if session_line(err_path) is None:
            return "startup"
        streaming = self.model.streaming_now()
        if streaming is not None:
            return streaming
        if any(pid != proc.pid for pid in _project_processes(self.project)):
            return "tool"
        return "between"

    def ended_by_itself(self, code: int, err_path: Path) -> None:
        """Count a run that exited before its kill: a finished turn, or a failure."""
        text = err_path.read_text(errors="replace")
        if code == 0 and "Traceback" not in text:
            self.figures.turns_finished += 1
            return
        self.figures.failed_runs += 1
        self.problem(f"{err_path.name}: exit status {code}: {text[-1500:]}")

    def check(self, server: ScriptedServer, *, killed: bool = False) -> None:
        """Check the store against every request received since the last check (those of
        one run; ``killed``: it was killed)."""
        if self.session_id is None:
            return
        db = self.memory_dir / "sessions.sqlite3"
        try:
            damage = integrity_problem(db)
            record = load(self.memory_dir, self.session_id)
        except Exception as exc:
            self.figures.sessions_unreadable += 1
            self.problem(f"session unreadable: {type(exc).__name__}: {exc}")
            return
        if damage is not None:
            self.figures.sessions_unreadable += 1
            self.problem(f"integrity_check: {damage}")
        transcript = record["transcript"]
        if len(transcript) < self.transcript_len:
            self.figures.transcripts_shrunk += 1
            self.problem(f"transcript shrank from {self.transcript_len} to {len(transcript)}")
        self.transcript_len = len(transcript)
        summaries = [c["summary"] for c in record["compactions"]]
        requests = server.requests
        with (self.logs / "requests.jsonl").open("a", encoding="utf-8") as saved:
            for index in range(self.checked_requests, len(requests)):
                print(json.dumps({"request": index, "run": self.run_label,
                                  "body": requests[index]}), file=saved)
        # The conversation's last request in a run that was killed may carry what its own
        # checkpoint was still writing (its answer was never used).
        conversation = [i for i in range(self.checked_requests, len(requests))
                        if not is_summary_request(requests[i])
                        and requests[i].get("tools")]
        last = conversation[-1] if killed and conversation else None
        for index in range(self.checked_requests, len(requests)):
            body = requests[index]
            why = missing_from_transcript(body, transcript, summaries,
                                          unsaved_tail=index == last)
            if why is not None:
                self.figures.checkpoints_lost += 1
                self.problem(f"request {index}: {why} (transcript has {len(transcript)})")
            pairing = tool_pairing_errors(body.get("messages") or [])
            if pairing:
                self.figures.unpaired_tool_calls_sent += len(pairing)
                self.problem(f"request {index}: unpaired tool calls: {pairing}")
        self.checked_requests = len(requests)

    def final_run(self, server: ScriptedServer) -> None:
        """One more resume, left alone: it must answer (exit 0) on the saved session."""
        self.run_label = "final"
        with self.start(server, "final", f"{PROMPT} (final run)", self.backends[0]) as (
            proc, err_path
        ):
            try:
                code = proc.wait(timeout=FINAL_RUN_TIMEOUT)
            except subprocess.TimeoutExpired:
                code = -1
        kill_leftovers(self.project)
        if code != 0 or session_line(err_path) != self.session_id:
            self.figures.failed_runs += 1
            self.problem(f"final run: exit {code}: {err_path.read_text(errors='replace')[-1500:]}")
        self.check(server)

    def finish(self, server: ScriptedServer) -> None:
        """The checks over the whole run: the ledger and the results the session holds."""
        figures = self.figures
        ledger_path = self.project / LEDGER
        ledger = Counter(ledger_path.read_text().split()) if ledger_path.exists() else Counter()
        figures.tools_replayed = sum(1 for count in ledger.values() if count > 1)
        for token, count in ledger.items():
            if count > 1:
                self.problem(f"ledger token {token} appears {count} times")
        figures.tool_calls_executed = len(ledger)
        figures.tool_calls_requested = self.model.tool_calls
        figures.compaction_requests = self.model.summaries
        figures.requests_served = len(server.requests)
        figures.server_errors = list(server.errors)
        if self.session_id is None:
            return
        record = load(self.memory_dir, self.session_id)
        transcript = record["transcript"]
        figures.transcript_messages = len(transcript)
        figures.compactions_saved = len(record["compactions"])
        bash_calls = {
            call["id"]
            for message in transcript
            for call in tool_calls_of(message)
            if (call.get("function") or {}).get("name") == "run_bash"
        }
        for message in transcript:
            call_id = message.get("tool_call_id")
            if message.get("role") != "tool" or call_id not in bash_calls:
                continue
            content = str(message.get("content") or "")
            ran = token_of(call_id) in ledger
            if content.startswith(INTERRUPTED_NOTICE):
                figures.recovered_outcome_unknown += 1
            elif content.startswith(NOT_STARTED_NOTICE):
                figures.recovered_not_executed += 1
                if ran:
                    figures.ran_but_reported_not_executed += 1
                    self.problem(f"{call_id} ran but is answered 'not executed'")
            elif "exit status 0" in content.split("\n", 2)[:2] and not ran:
                figures.reported_done_but_never_ran += 1
                self.problem(f"{call_id} is answered as done but never wrote its token")


def run_torture(
    kills: int = DEFAULT_KILLS,
    seed: int = DEFAULT_SEED,
    *,
    workdir: Path | None = None,
    backends: Sequence[str] = ("asyncio", "trio"),
    context_room: int = CONTEXT_ROOM,
    log: TextIO | None = None,
) -> Figures:
    """Run ``kills`` kill iterations (plus a final undisturbed run) and return the figures.

    The harness runs with ``--max-context-tokens`` = :func:`fixed_context_tokens` +
    ``context_room``. Works in ``workdir`` (kept afterwards) or in a temporary directory
    (removed).
    """
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        if workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="torture-")))
        torture = Torture(workdir, seed, backends, context_room, log)
        server = stack.enter_context(ScriptedServer(torture.model))
        stack.callback(kill_leftovers, torture.project)
        for i in range(kills):
            torture.iteration(server, i)
        torture.final_run(server)
        torture.finish(server)
        torture.figures.session_id = torture.session_id or ""
    torture.figures.elapsed_s = round(time.monotonic() - started, 1)
    return torture.figures
