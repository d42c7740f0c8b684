#!/usr/bin/env python
"""Benchmark a whole harness turn: the harness's own overhead, and long sessions with compaction.

Run from the repository root::

    python benchmarks/turn.py                 # full run (a few minutes on 2 cores)
    python benchmarks/turn.py --quick         # smaller sizes, a smoke run (< 20 s)
    python benchmarks/turn.py --json          # print the figures as one JSON object
    python benchmarks/turn.py --turns 100 --backend trio
    python benchmarks/turn.py --skip-long     # only part 1 (--skip-overhead: only part 2)
    python benchmarks/turn.py --skip-long --lengths 20,4000

The real :class:`~actors.runtime.supervisor.Supervisor` (model client, tool executor, checkpoint
writer, compactor, SQLite store with real ``fsync``) runs in this process under ``anyio.run``
against the scripted chat-completions server of the tests (real HTTP on loopback, in a
process of its own, as a real server is, answering with no artificial delay). Scratch
directories are removed at the end. Progress goes to stderr; the tables (or the JSON) go to stdout.

1. **Harness overhead per turn.** Each user turn makes the model call ``read_file`` on a small
   file, then answer in text: two chat requests, one tool call, four new messages. The server
   times every request from the moment its handler starts (headers read) to the last byte
   written. *Overhead* is the wall time of ``run_turn`` minus that server time. Two sessions
   grow by alternate turns, one with the workspace snapshots on (as users run it: a snapshot
   of the project at each user message) and one with them off, so both see the machine alike.
   The **baseline** beside it, in the same run: the same request bodies (those of the
   window's middle turn) replayed with the bare HTTP client under the SDK (POST, read the
   answer's bytes to the end), minus the server's time: the floor of the two round trips.
   Also beside it: the same replay through a bare ``openai.AsyncOpenAI`` client, and
   ``json.dumps`` of the bodies. The overhead is broken down by timing, inside this
   benchmark only, the supervisor's ``_checkpoint``, ``_record_results``, ``_ask_model`` and
   ``_run_tools`` (wrapped on the instance, whatever their parameters) and the store's
   SQLite work; the store's durable writes (commits) are counted. A checkpoint made while
   a request goes out (the user's message, a batch of reads) is its own column: its time
   is inside the model client's. Medians over a window of turns around each session length;
   compaction off.
2. **A long session with and without compaction.** ``--turns`` user turns (each: one
   ``read_file`` of ~1.5 KB, then a ~300-character answer), once with a context budget so
   large nothing compacts and once with the defaults (``max_context_tokens=24_000``,
   ``compact_threshold=0.8``). The server answers the compactor's summary requests with a
   ~500-character summary. Reported: the size of each turn's largest chat request (JSON bytes
   on the wire and the harness's token estimate of its messages), per-turn time by window,
   total time, compactions, and whether any request went over the budget.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import itertools
import json
import multiprocessing
import os
import platform
import shutil
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import anyio
import openai
from anyio.streams.memory import MemoryObjectReceiveStream

from actors.core.budget import estimate_messages
from actors.core.config import Settings
from actors.core.events import CompactionState, Event, Notice
from actors.model._http import http
from actors.runtime.compactor import SUMMARY_PROMPT
from actors.runtime.supervisor import Supervisor
from actors.store import SessionStore
from actors.testing.scripted_server import (
    Reply,
    Responder,
    ScriptedServer,
    Step,
    ToolCall,
    _Handler,
)
from actors.testing.settings import settings_for

JSON = dict[str, Any]
SUMMARY_MARK = SUMMARY_PROMPT.split(",")[0]  # "Summarize conversation data"
WORDS = (  # noqa: SIM905 (a word list reads better as prose)
    "the read file shows that config value is loaded before the session starts and the "
    "test checks each step of the plan so we keep the change small and verify the output "
    "again after the fix lands in the module with its tests passing"
).split()

# -- configuration ------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    """Sizes of one run."""

    name: str
    lengths: tuple[int, ...]  # part 1: session lengths (messages) to report overhead at
    window: int  # part 1: turns per median window
    replays: int  # part 1: bare-client replays of each request body per length
    turns: int  # part 2: user turns per run
    budget: int  # part 2: max_context_tokens of the "defaults" run
    threshold: float = 0.8  # part 2: compact_threshold of the "defaults" run
    off_budget: int = 10_000_000  # part 2: max_context_tokens of the "off" run
    warmup_turns: int = 3  # a throwaway session first (imports, pools, caches)


FULL = Config("full", (20, 500, 1_000, 2_000, 4_000), window=11, replays=3, turns=200,
              budget=24_000)
QUICK = Config("quick", (10, 50, 100), window=5, replays=2, turns=30, budget=6_000)

# -- the scripted model -------------------------------------------------------------------


def filler(label: str, chars: int, seed: int) -> str:
    """Deterministic prose of about ``chars`` characters."""
    out = [label]
    length = len(label)
    i = seed
    while length < chars:
        word = WORDS[(i * 7 + seed) % len(WORDS)]
        out.append(word)
        length += len(word) + 1
        i += 1
    return " ".join(out)[:chars].rstrip() + "."


def make_responder(files: Sequence[str], answer_chars: int, summary_chars: int) -> Responder:
    """A stateless responder (its answer depends only on the body, so replays match).

    A compactor summary request gets a summary; a request ending with a tool result gets the
    text answer; anything else gets one ``read_file`` call.
    """

    def respond(body: JSON) -> Step:
        messages = body.get("messages") or []
        first = messages[0].get("content") if messages else ""
        n = len(messages)
        if isinstance(first, str) and first.startswith(SUMMARY_MARK):
            return Reply(filler("Summary: the user asked for files to be read;", summary_chars, n))
        if messages and messages[-1].get("role") == "tool":
            return Reply(filler(f"Answer {n}:", answer_chars, n))
        return Reply(tool_calls=[ToolCall("read_file", {"path": files[n % len(files)]})])

    return respond


@dataclass
class RequestTiming:
    """One chat request as the server saw it."""

    index: int  # into server.requests
    seconds: float  # handler start (headers read) to the last byte written
    body_bytes: int  # Content-Length of the request
    summary: bool  # a compactor summary request
    replay: bool  # sent by this benchmark's bare client, not the harness


class _TimedHandler(_Handler):
    """The scripted server's handler, timing each POST (benchmark only)."""

    _bench_step: tuple[int, JSON] | None = None

    def do_POST(self) -> None:
        self._bench_step = None
        start = time.perf_counter()
        try:
            super().do_POST()
        finally:
            seconds = time.perf_counter() - start
            if self._bench_step is not None:
                index, body = self._bench_step
                owner = self.server.owner
                assert isinstance(owner, TimedServer)
                owner.record(RequestTiming(
                    index, seconds, int(self.headers.get("Content-Length") or 0),
                    is_summary(body), body.get("model") == REPLAY_MODEL,
                ))

    def _play(self, step: Step, body: JSON, streaming: bool) -> None:
        self._bench_step = (int(step.request_index or 0), body)
        super()._play(step, body, streaming)


REPLAY_MODEL = "bench-replay"


def is_summary(body: JSON) -> bool:
    """Whether a request body is a compactor summary request."""
    messages = body.get("messages") or [{}]
    content = messages[0].get("content")
    return isinstance(content, str) and content.startswith(SUMMARY_MARK)


class TimedServer(ScriptedServer):
    """A :class:`ScriptedServer` that records a :class:`RequestTiming` per chat request."""

    def __init__(self, responder: Responder) -> None:
        super().__init__(responder)
        self._httpd.RequestHandlerClass = _TimedHandler  # before any connection
        self._timings: dict[int, RequestTiming] = {}
        self._timed = threading.Condition()

    def record(self, timing: RequestTiming) -> None:
        with self._timed:
            self._timings[timing.index] = timing
            self._timed.notify_all()

    def timing(self, index: int, timeout: float = 5.0) -> RequestTiming:
        """The timing of request ``index``, waiting for its handler to finish (blocking)."""
        with self._timed:
            if not self._timed.wait_for(lambda: index in self._timings, timeout):
                raise TimeoutError(f"no timing for request {index}")
            return self._timings[index]

    @property
    def count(self) -> int:
        """How many chat requests have arrived."""
        with self._cond:
            return len(self._requests)

    def body(self, index: int) -> JSON:
        """The body of request ``index`` (no copy of the whole list)."""
        with self._cond:
            return self._requests[index]


def serve_in_child(conn: Connection, files: list[str], answer_chars: int,
                   summary_chars: int) -> None:
    """The child process: a :class:`TimedServer`, answering its owner's questions on
    ``conn`` (its URL first) until told to close."""
    server = TimedServer(make_responder(files, answer_chars, summary_chars))
    conn.send(server.base_url)
    try:
        while True:
            command, argument = conn.recv()
            if command == "close":
                break
            try:
                if command == "count":
                    conn.send(server.count)
                elif command == "timing":
                    conn.send(server.timing(argument))
                elif command == "body":
                    conn.send(server.body(argument))
            except Exception as exc:  # answered, raised in the owner
                conn.send(exc)
    finally:
        server.close()
        conn.close()


class ServerProcess:
    """The timed scripted server in a process of its own (as a real server is): its Python
    work (reading and parsing a 500 KB body, writing the stream) does not hold this
    process's interpreter lock while the harness runs. The same questions as
    :class:`TimedServer`, answered over a pipe (thread-safe)."""

    def __init__(self, files: list[str], answer_chars: int, summary_chars: int) -> None:
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(
            target=serve_in_child, args=(child, files, answer_chars, summary_chars),
            name="turn-bench-server", daemon=True,
        )
        self._process.start()
        child.close()
        if not self._conn.poll(60):
            raise TimeoutError("the benchmark's server process did not start")
        self.base_url: str = self._conn.recv()
        self._lock = threading.Lock()

    def _ask(self, command: str, argument: Any = None) -> Any:
        with self._lock:
            self._conn.send((command, argument))
            if not self._conn.poll(30):
                raise TimeoutError(f"the benchmark's server did not answer {command!r}")
            answer = self._conn.recv()
        if isinstance(answer, Exception):
            raise answer
        return answer

    @property
    def count(self) -> int:
        """How many chat requests have arrived."""
        return int(self._ask("count"))

    def timing(self, index: int) -> RequestTiming:
        """The timing of request ``index``, waiting for its handler to finish (blocking)."""
        timing: RequestTiming = self._ask("timing", index)
        return timing

    def body(self, index: int) -> JSON:
        """The body of request ``index``."""
        body: JSON = self._ask("body", index)
        return body

    def close(self) -> None:
        with contextlib.suppress(OSError, ValueError), self._lock:
            self._conn.send(("close", None))
        self._process.join(10)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()
        self._conn.close()


# -- instrumented harness (subclasses used only here) -------------------------------------


class TimedStore(SessionStore):
    """The SQLite store, timing its write work (it runs in the checkpoint writer's thread)
    and counting its durable writes (``seconds["writes"]``: one commit each)."""

    def __init__(self, memory_dir: Path) -> None:
        super().__init__(memory_dir)
        self.seconds: dict[str, float] = defaultdict(float)
        self.replacements = 0

    def checkpoint(self, *args: Any, **kwargs: Any) -> int:
        start = time.perf_counter()
        try:
            return super().checkpoint(*args, **kwargs)
        finally:
            self.seconds["checkpoint"] += time.perf_counter() - start
            self.seconds["writes"] += 1

    def append(self, *args: Any, **kwargs: Any) -> int:
        start = time.perf_counter()
        try:
            return super().append(*args, **kwargs)
        finally:
            self.seconds["checkpoint"] += time.perf_counter() - start
            self.seconds["writes"] += 1

    def mark_started(self, *args: Any, **kwargs: Any) -> None:
        start = time.perf_counter()
        try:
            super().mark_started(*args, **kwargs)
        finally:
            self.seconds["mark_started"] += time.perf_counter() - start
            self.seconds["writes"] += 1

    def replace_context(self, *args: Any, **kwargs: Any) -> None:
        self.replacements += 1
        super().replace_context(*args, **kwargs)


def time_into(owner: Any, name: str, phases: dict[str, float], key: str,
              count: str | None = None) -> None:
    """Replace the bound method ``owner.name`` by a wrapper adding its wall time to
    ``phases[key]`` (and 1 to ``phases[count]``). The wrapper takes whatever the method
    takes: no signature is copied here, so the benchmark follows the supervisor as it
    changes, and a method that is renamed or removed fails here, loudly."""
    method = getattr(owner, name)  # AttributeError if the supervisor no longer has it
    if not callable(method):
        raise TypeError(f"{type(owner).__name__}.{name} is not a method")

    @functools.wraps(method)
    async def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return await method(*args, **kwargs)
        finally:
            phases[key] += time.perf_counter() - start
            if count is not None:
                phases[count] += 1

    setattr(owner, name, timed)


class TimedSupervisor(Supervisor):
    """The supervisor, timing the phases of a turn into ``phases`` (seconds).

    Its methods are wrapped on the instance (:func:`time_into`), not overridden: the
    checkpoints (``_checkpoint``, and ``_record_results``: the batch's results checkpoint,
    the batch settled and saved), the model request (``_ask_model``) and the tool batch
    (``_run_tools``, less the results checkpoint it ends with). A checkpoint made while a
    request goes out (inside ``_ask_model``: the user's message, a batch of reads) is
    counted apart, as ``overlapped``: its time is inside the model's.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.phases: dict[str, float] = defaultdict(float)
        asking = [False]
        checkpoint = self._checkpoint

        @functools.wraps(checkpoint)
        async def timed_checkpoint(*args: Any, **kwargs: Any) -> Any:
            key = "overlapped" if asking[0] else "checkpoint"
            start = time.perf_counter()
            try:
                return await checkpoint(*args, **kwargs)
            finally:
                self.phases[key] += time.perf_counter() - start
                self.phases["checkpoints"] += 1

        ask_model = self._ask_model

        @functools.wraps(ask_model)
        async def marked_ask(*args: Any, **kwargs: Any) -> Any:
            asking[0] = True
            try:
                return await ask_model(*args, **kwargs)
            finally:
                asking[0] = False

        self._checkpoint = timed_checkpoint  # type: ignore[method-assign]
        self._ask_model = marked_ask  # type: ignore[method-assign]
        time_into(self, "_record_results", self.phases, "results", "checkpoints")
        time_into(self, "_ask_model", self.phases, "model")
        time_into(self, "_run_tools", self.phases, "tools+results")


@dataclass
class Drain:
    """Counts of interesting events (the rest is dropped)."""

    waited_for_compaction: int = 0
    compacted_notices: int = 0
    warnings: list[str] = field(default_factory=list)
    compacting: bool = False  # from CompactionState


async def drain(receive: MemoryObjectReceiveStream[Event], counts: Drain) -> None:
    """Consume the supervisor's events as a front end would, keeping only counts."""
    async with receive:
        async for event in receive:
            if isinstance(event, CompactionState):
                counts.compacting = event.running
            elif isinstance(event, Notice):
                if event.text.startswith("Waiting for the compaction"):
                    counts.waited_for_compaction += 1
                elif event.text.startswith("Context compacted"):
                    counts.compacted_notices += 1
                elif event.level != "info":
                    counts.warnings.append(event.text)


@contextlib.asynccontextmanager
async def session(
    settings: Settings, store: SessionStore, counts: Drain
) -> AsyncIterator[TimedSupervisor]:
    """Open a timed supervisor with an event consumer (like ``tests.support.runtime.running``)."""
    send, receive = anyio.create_memory_object_stream[Event](1000)
    async with anyio.create_task_group() as tg:
        tg.start_soon(drain, receive, counts)
        try:
            async with TimedSupervisor.open(settings, store, events=send) as sup:
                assert isinstance(sup, TimedSupervisor)
                yield sup
        finally:
            send.close()


def machine() -> dict[str, Any]:
    """Facts about the machine and runtime that the figures depend on."""
    return {"cpus": os.cpu_count(), "python": platform.python_version(),
            "sqlite": sqlite3.sqlite_version, "platform": platform.platform()}


# -- statistics ---------------------------------------------------------------------------


def median(values: Sequence[float]) -> float:
    """The median (0 for no values)."""
    return statistics.median(values) if values else 0.0


def p95(values: Sequence[float]) -> float:
    """The 95th percentile, nearest rank."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, -(-95 * len(ordered) // 100) - 1))]


def ms(seconds: float) -> float:
    """Seconds to milliseconds, rounded for the report."""
    return round(seconds * 1000, 2)


# -- part 1: overhead per turn ------------------------------------------------------------


@dataclass
class TurnSample:
    """One measured turn of part 1 or 2."""

    turn: int  # 1-based
    start_len: int  # messages in the context before the turn
    seconds: float  # wall time of run_turn
    requests: tuple[int, int]  # server request indices [first, last) seen during the turn
    phases: dict[str, float]
    store: dict[str, float]
    context_tokens: int  # the harness's estimate after the turn


@dataclass
class OverheadRow:
    """Part 1 figures at one session length (medians, milliseconds)."""

    target_messages: int
    messages: int  # median context length at the start of the window's turns
    turns: int
    turn_ms: float
    server_ms: float
    overhead_ms: float
    model_client_ms: float  # waiting on the model actor, minus server time
    http_ms: float  # the baseline: bare HTTP round trips of the same requests minus server
    sdk_ms: float  # bare openai client: round trip minus server time (both requests)
    json_dumps_ms: float  # json.dumps of both request bodies
    checkpoint_ms: float  # checkpoints on the turn's path (lock, writer hop, store)
    store_ms: float  # SQLite work of every checkpoint in the writer thread
    tools_ms: float  # the executor round trip, mark_started included
    other_ms: float  # overhead minus the three above
    request_kb: float  # the turn's larger request body
    writes: float = 0.0  # durable writes (commits) of messages and records per turn
    overhead_off_ms: float = 0.0  # the same, in the session with the workspace snapshots off
    overlapped_ms: float = 0.0  # checkpoints made while a request went out (in model's time)


async def run_turns(
    sup: TimedSupervisor, store: TimedStore, server: ServerProcess, count: int,
    prompt: Callable[[int], str], progress: str, first_turn: int = 1, total: int = 0,
) -> list[TurnSample]:
    """Run ``count`` user turns (numbered from ``first_turn``, of ``total``), sampling each."""
    samples = []
    total = total or count
    for k in range(first_turn, first_turn + count):
        sup.phases.clear()
        store.seconds.clear()
        start_len = len(sup.snapshot().messages)
        first = server.count
        start = time.perf_counter()
        result = await sup.run_turn(prompt(k))
        seconds = time.perf_counter() - start
        if not result.ok:
            raise RuntimeError(f"turn {k} did not finish: {result.outcome}: {result.text}")
        samples.append(TurnSample(k, start_len, seconds, (first, server.count),
                                  dict(sup.phases), dict(store.seconds), sup.snapshot().tokens))
        if k % 50 == 0 or k == total:
            print(f"  {progress}: turn {k}/{total}, {len(sup.snapshot().messages)} messages, "
                  f"{seconds * 1000:.1f} ms", file=sys.stderr)
    return samples


async def chat_timings(server: ServerProcess, sample: TurnSample) -> list[RequestTiming]:
    """The harness's chat requests (not summaries) made during ``sample``'s turn."""
    timings = []
    for index in range(*sample.requests):
        timing = await anyio.to_thread.run_sync(server.timing, index)
        if not timing.summary and not timing.replay:
            timings.append(timing)
    return timings


async def replay_http(client: Any, server: ServerProcess, body: JSON) -> float:
    """POST ``body`` with a bare HTTP client (the one under the SDK) and read the answer's
    bytes to the end; return its time beyond the server's: the floor of a request."""
    data = json.dumps({**body, "model": REPLAY_MODEL}, ensure_ascii=False,
                      separators=(",", ":")).encode()
    index = server.count
    start = time.perf_counter()
    async with client.stream("POST", "/chat/completions", content=data,
                             headers={"Content-Type": "application/json"}) as response:
        async for _ in response.aiter_bytes():
            pass
    seconds = time.perf_counter() - start
    timing = await anyio.to_thread.run_sync(server.timing, index)
    return seconds - timing.seconds


async def replay(client: openai.AsyncOpenAI, server: ServerProcess, body: JSON) -> float:
    """Send ``body`` again with a bare client; return its time beyond the server's."""
    kwargs = {key: body[key] for key in ("messages", "tools", "stream", "stream_options")
              if key in body}
    index = server.count
    start = time.perf_counter()
    stream = await client.chat.completions.create(model=REPLAY_MODEL, **kwargs)
    async with stream:
        async for _ in stream:
            pass
    seconds = time.perf_counter() - start
    timing = await anyio.to_thread.run_sync(server.timing, index)
    return seconds - timing.seconds


def dumps_seconds(body: JSON, repeat: int = 5) -> float:
    """Median time of ``json.dumps`` of a request body."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        json.dumps(body)
        times.append(time.perf_counter() - start)
    return median(times)


async def bench_overhead(cfg: Config, on: Scenario, off: Scenario) -> list[OverheadRow]:
    """Part 1: grow two sessions by alternate turns, one with the workspace snapshots on (as
    users run the harness), one with them off; the overhead per turn at each length, with
    the bare-HTTP and bare-SDK replays of the first one's requests beside it."""
    counts = Drain()
    for sc in (on, off):
        async with session(sc.settings, sc.store, counts) as sup:  # warm-up, thrown away
            await run_turns(sup, sc.store, sc.server, cfg.warmup_turns,
                            lambda k: f"Warm-up {k}", "warm-up")
    last = max(cfg.lengths) + 2 * cfg.window  # new messages per turn: 4
    turns = (last - 1) // 4 + 1
    samples: dict[str, list[TurnSample]] = {"on": [], "off": []}
    async with session(on.settings, on.store, counts) as sup_on, \
            session(off.settings, off.store, counts) as sup_off:
        for k in range(1, turns + 1):  # alternated: both see the machine's load alike
            for label, sup, sc in (("on", sup_on, on), ("off", sup_off, off)):
                samples[label] += await run_turns(
                    sup, sc.store, sc.server, 1,
                    lambda k: f"Turn {k}: read the notes and tell me what they say.",
                    f"overhead, snapshots {label}", first_turn=k, total=turns)
    rows = []
    settings, server = on.settings, on.server
    async with openai.AsyncOpenAI(base_url=settings.base_url, api_key="test",
                                  max_retries=0) as client, \
            http.AsyncClient(base_url=settings.base_url, timeout=20.0) as bare:
        first = server.body(samples["on"][0].requests[0])
        await replay(client, server, first)  # connect, warm up
        await replay_http(bare, server, first)
        for target in cfg.lengths:
            row = await overhead_row(cfg, target, window_of(samples["on"], target, cfg),
                                     server, client, bare)
            row.overhead_off_ms = await overhead_of(window_of(samples["off"], target, cfg),
                                                    off.server)
            rows.append(row)
    return rows


def window_of(samples: list[TurnSample], target: int, cfg: Config) -> list[TurnSample]:
    """The ``cfg.window`` turns that started nearest to ``target`` messages, in order."""
    window = sorted(samples, key=lambda s: (abs(s.start_len - target), s.turn))
    return sorted(window[: cfg.window], key=lambda s: s.turn)


async def overhead_of(window: list[TurnSample], server: ServerProcess) -> float:
    """The median overhead (ms) of a window's turns."""
    overheads = []
    for sample in window:
        served = sum(t.seconds for t in await chat_timings(server, sample))
        overheads.append(sample.seconds - served)
    return ms(median(overheads))


async def overhead_row(
    cfg: Config, target: int, window: list[TurnSample], server: ServerProcess,
    client: openai.AsyncOpenAI, bare: Any,
) -> OverheadRow:
    """Medians of one window, and the bare replays of its middle turn's requests."""
    per: dict[str, list[float]] = defaultdict(list)
    sizes = []
    for sample in window:
        timings = await chat_timings(server, sample)
        served = sum(t.seconds for t in timings)
        overhead = sample.seconds - served
        model = sample.phases.get("model", 0.0) - served
        results = sample.phases.get("results", 0.0)  # inside the tool batch's time
        checkpoint = sample.phases.get("checkpoint", 0.0) + results
        tools = sample.phases.get("tools+results", 0.0) - results
        per["turn"].append(sample.seconds)
        per["server"].append(served)
        per["overhead"].append(overhead)
        per["model"].append(model)
        per["checkpoint"].append(checkpoint)
        per["store"].append(sample.store.get("checkpoint", 0.0))
        per["writes"].append(sample.store.get("writes", 0.0))
        per["overlapped"].append(sample.phases.get("overlapped", 0.0))
        per["tools"].append(tools)
        per["other"].append(overhead - model - checkpoint - tools)
        sizes.append(max(t.body_bytes for t in timings))
    middle = window[len(window) // 2]
    sdk = floor = dumps = 0.0
    for index in range(*middle.requests):
        body = server.body(index)
        extra = [await replay(client, server, body) for _ in range(cfg.replays)]
        sdk += median(extra)
        extra = [await replay_http(bare, server, body) for _ in range(cfg.replays)]
        floor += median(extra)
        dumps += dumps_seconds(body)
    return OverheadRow(
        target_messages=target,
        messages=round(median([s.start_len for s in window])),
        turns=len(window),
        turn_ms=ms(median(per["turn"])),
        server_ms=ms(median(per["server"])),
        overhead_ms=ms(median(per["overhead"])),
        model_client_ms=ms(median(per["model"])),
        http_ms=ms(floor),
        sdk_ms=ms(sdk),
        json_dumps_ms=ms(dumps),
        checkpoint_ms=ms(median(per["checkpoint"])),
        store_ms=ms(median(per["store"])),
        tools_ms=ms(median(per["tools"])),
        other_ms=ms(median(per["other"])),
        request_kb=round(median(sizes) / 1024, 1),
        writes=median(per["writes"]),
        overlapped_ms=ms(median(per["overlapped"])),
    )


# -- part 2: a long session with and without compaction -----------------------------------


@dataclass
class SizePoint:
    """The largest chat request of one turn."""

    turn: int
    messages: int  # in that request
    body_bytes: int  # JSON body on the wire (tool schemas included)
    estimate_tokens: int  # the harness's estimate of the request's messages
    context_tokens: int  # the harness's context estimate after the turn (what compaction uses)


@dataclass
class WindowStats:
    """Per-turn times over a range of turns."""

    turns: str
    median_ms: float
    p95_ms: float


@dataclass
class LongRun:
    """Part 2 figures of one run."""

    label: str
    max_context_tokens: int
    compact_threshold: float
    turns: int
    total_s: float  # wall time of all the turns, back to back
    sizes: list[SizePoint]
    windows: list[WindowStats]
    summary_requests: int
    compactions: int  # contexts replaced in the store
    waited_for_compaction: int  # turns whose request had to wait for a compaction
    max_request_estimate: int  # largest harness estimate of a chat request's messages
    max_request_bytes: int
    max_summary_request_bytes: int
    max_summary_request_estimate: int  # the harness's estimate of its messages
    over_budget_requests: int  # chat requests whose estimate exceeded max_context_tokens
    final_messages: int
    warnings: list[str]


def size_turns(turns: int) -> list[int]:
    """Turns 1, N/4, N/2, 3N/4 and N (1, 50, 100, 150, 200 for 200 turns)."""
    return sorted({1, *(max(1, round(turns * q / 4)) for q in (1, 2, 3, 4))})


async def bench_long(
    label: str, cfg: Config, settings: Settings, store: TimedStore, server: ServerProcess
) -> LongRun:
    """Part 2: one long session of ``cfg.turns`` turns."""
    counts = Drain()
    async with session(settings, store, counts) as sup:
        start = time.perf_counter()
        samples = await run_turns(
            sup, store, server, cfg.turns,
            lambda k: f"Turn {k}: read the next module and summarise what it does.", label,
        )
        total = time.perf_counter() - start
        await anyio.wait_all_tasks_blocked()  # the events of the last turn were counted
        for _ in range(6_000):  # let a last background compaction finish (up to 60 s)
            if not counts.compacting:
                break
            await anyio.sleep(0.01)
        final_messages = len(sup.snapshot().messages)
    budget = settings.max_context_tokens
    chat_max: dict[int, tuple[int, int, int]] = {}  # turn -> (bytes, estimate, messages)
    max_estimate = max_bytes = max_summary = max_summary_estimate = over = summaries = 0
    for index in range(server.count):
        timing = await anyio.to_thread.run_sync(server.timing, index)
        messages = server.body(index)["messages"]
        estimate = estimate_messages(messages)
        if timing.summary:
            summaries += 1
            max_summary = max(max_summary, timing.body_bytes)
            max_summary_estimate = max(max_summary_estimate, estimate)
            continue
        over += estimate > budget
        max_estimate = max(max_estimate, estimate)
        max_bytes = max(max_bytes, timing.body_bytes)
    for sample in samples:
        best = (0, 0, 0)
        for timing in await chat_timings(server, sample):
            messages = server.body(timing.index)["messages"]
            best = max(best, (timing.body_bytes, estimate_messages(messages), len(messages)))
        chat_max[sample.turn] = best
    by_turn = {s.turn: s for s in samples}
    sizes = [
        SizePoint(t, chat_max[t][2], chat_max[t][0], chat_max[t][1], by_turn[t].context_tokens)
        for t in size_turns(cfg.turns)
    ]
    bounds = [round(cfg.turns * q / 4) for q in range(5)]
    windows = []
    for lo, hi in itertools.pairwise(bounds):
        chunk = [s.seconds for s in samples[lo:hi]]
        windows.append(WindowStats(f"{lo + 1}-{hi}", ms(median(chunk)), ms(p95(chunk))))
    return LongRun(
        label=label, max_context_tokens=budget, compact_threshold=settings.compact_threshold,
        turns=cfg.turns, total_s=round(total, 2), sizes=sizes, windows=windows,
        summary_requests=summaries, compactions=store.replacements,
        waited_for_compaction=counts.waited_for_compaction,
        max_request_estimate=max_estimate, max_request_bytes=max_bytes,
        max_summary_request_bytes=max_summary, max_summary_request_estimate=max_summary_estimate,
        over_budget_requests=over,
        final_messages=final_messages, warnings=counts.warnings,
    )


# -- setup, reporting and the program -----------------------------------------------------


@dataclass
class Scenario:
    """Everything one ``anyio.run`` needs, prepared beforehand (blocking setup)."""

    settings: Settings
    store: TimedStore
    server: ServerProcess


def prepare(
    work: Path, name: str, files: dict[str, str], answer_chars: int, **overrides: Any
) -> Scenario:
    """A sandbox with ``files``, a timed server and a fresh store, all under ``work/name``."""
    home = work / name
    server = ServerProcess(sorted(files), answer_chars, summary_chars=500)
    settings = settings_for(home, server.base_url, max_tool_calls=1_000_000, **overrides)
    for relative, text in files.items():
        path = settings.sandbox_dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return Scenario(settings, TimedStore(settings.memory_dir), server)


def module_text(i: int, size: int = 1_300) -> str:
    """A fake source file of about ``size`` bytes (its numbered listing is ~1.5 KB)."""
    lines = [f'"""Module {i}: helpers for the benchmark."""', ""]
    n = 0
    while sum(len(line) + 1 for line in lines) < size:
        lines.append(f"def helper_{i}_{n}(value: int) -> int:")
        lines.append(f"    return value * {n + 2} + {i}  # {WORDS[n % len(WORDS)]}")
        n += 1
    return "\n".join(lines) + "\n"


def render(overhead: list[OverheadRow], runs: list[LongRun], cfg: Config,
           facts: dict[str, Any]) -> str:
    """The tables, as Markdown."""
    lines = [
        f"Run: {cfg.name}; backend {facts['backend']}; {facts['cpus']} CPUs; Python "
        f"{facts['python']}; openai {facts['openai']}; SQLite {facts['sqlite']}; load average "
        f"{', '.join(str(x) for x in facts['load_average'])} (1, 5, 15 min, at the end)",
        "",
        "Harness overhead per turn (1 tool call + 1 answer; medians over "
        f"{cfg.window} turns; ms):",
        "",
        "| messages | turn | server | **overhead** | snapshots off | baseline: bare HTTP "
        "| bare SDK | model client | checkpoints on the path | overlapped with a request "
        "| SQLite (all commits) | commits | tool | other | json.dumps | request |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in overhead:
        lines.append(
            f"| ~{r.target_messages} ({r.messages}) | {r.turn_ms:.1f} | {r.server_ms:.1f} "
            f"| **{r.overhead_ms:.1f}** | {r.overhead_off_ms:.1f} | {r.http_ms:.1f} "
            f"| {r.sdk_ms:.1f} | {r.model_client_ms:.1f} | {r.checkpoint_ms:.1f} "
            f"| {r.overlapped_ms:.1f} | {r.store_ms:.1f} | {r.writes:g} "
            f"| {r.tools_ms:.1f} | {r.other_ms:.1f} | {r.json_dumps_ms:.2f} "
            f"| {r.request_kb:.0f} KB |"
        )
    if overhead:
        low, high = overhead[0], overhead[-1]
        lines += ["", f"Overhead growth ~{low.target_messages} -> ~{high.target_messages} "
                  f"messages: {high.overhead_ms / max(low.overhead_ms, 1e-9):.2f}x "
                  f"(snapshots off: {high.overhead_off_ms / max(low.overhead_off_ms, 1e-9):.2f}x)"]
    if not runs:
        return "\n".join(lines)
    a, b = runs
    lines += [
        "",
        f"{cfg.turns}-turn session: compaction off (budget {a.max_context_tokens:,}) vs on "
        f"(budget {b.max_context_tokens:,}, threshold {b.compact_threshold:g}):",
        "",
        f"| | {a.label} | {b.label} |",
        "|---|---:|---:|",
    ]
    for pa, pb in zip(a.sizes, b.sizes, strict=True):
        lines.append(
            f"| request at turn {pa.turn}: bytes / est. tokens / messages "
            f"| {pa.body_bytes:,} / {pa.estimate_tokens:,} / {pa.messages} "
            f"| {pb.body_bytes:,} / {pb.estimate_tokens:,} / {pb.messages} |"
        )
    for wa, wb in zip(a.windows, b.windows, strict=True):
        lines.append(f"| turn time, turns {wa.turns}: median / p95 "
                     f"| {wa.median_ms:.1f} / {wa.p95_ms:.1f} ms "
                     f"| {wb.median_ms:.1f} / {wb.p95_ms:.1f} ms |")
    rows = [
        ("total wall time of the turns", f"{a.total_s:.1f} s", f"{b.total_s:.1f} s"),
        ("compactions (summary requests)", f"{a.compactions} ({a.summary_requests})",
         f"{b.compactions} ({b.summary_requests})"),
        ("requests that waited for a compaction", a.waited_for_compaction,
         b.waited_for_compaction),
        ("largest chat request: bytes / est. tokens",
         f"{a.max_request_bytes:,} / {a.max_request_estimate:,}",
         f"{b.max_request_bytes:,} / {b.max_request_estimate:,}"),
        ("largest summary request: bytes / est. tokens",
         f"{a.max_summary_request_bytes:,} / {a.max_summary_request_estimate:,}",
         f"{b.max_summary_request_bytes:,} / {b.max_summary_request_estimate:,}"),
        ("chat requests over the budget", a.over_budget_requests, b.over_budget_requests),
        ("messages in the context at the end", a.final_messages, b.final_messages),
    ]
    lines += [f"| {name} | {va} | {vb} |" for name, va, vb in rows]
    for run in runs:
        for warning in run.warnings:
            lines.append(f"\nwarning ({run.label}): {warning}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, run both parts, print the tables or the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run)")
    parser.add_argument("--json", action="store_true",
                        help="print the figures as one JSON object instead of the tables")
    parser.add_argument("--turns", type=int, metavar="N",
                        help="user turns of the long sessions (default 200; --quick 30)")
    parser.add_argument("--backend", choices=("asyncio", "trio"), default="asyncio")
    parser.add_argument("--skip-overhead", action="store_true", help="only run part 2")
    parser.add_argument("--skip-long", action="store_true", help="only run part 1")
    parser.add_argument("--lengths", metavar="N,N,...",
                        help="part 1: the session lengths to report (default 20,500,...,4000)")
    args = parser.parse_args(argv)
    cfg = QUICK if args.quick else FULL
    if args.turns is not None:
        if args.turns < 4:
            parser.error("--turns must be at least 4")
        cfg = Config(**{**asdict(cfg), "turns": args.turns})
    if args.lengths:
        lengths = tuple(int(n) for n in args.lengths.split(","))
        cfg = Config(**{**asdict(cfg), "lengths": lengths})
    started = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="turn-bench-"))
    overhead: list[OverheadRow] = []
    runs: list[LongRun] = []
    scenarios: list[Scenario] = []
    try:
        if not args.skip_overhead:
            print("part 1: overhead per turn", file=sys.stderr)
            small = {"notes.txt": "Remember to run the tests.\nThe config lives in app.toml.\n"}
            on = prepare(work, "overhead", small, answer_chars=120,
                         max_context_tokens=cfg.off_budget)
            off = prepare(work, "overhead-no-snapshots", small, answer_chars=120,
                          max_context_tokens=cfg.off_budget, workspace_snapshots=False)
            scenarios += [on, off]
            overhead = anyio.run(bench_overhead, cfg, on, off, backend=args.backend)
        if not args.skip_long:
            modules = {f"src/module_{i}.py": module_text(i) for i in range(8)}
            for label, budget, threshold in (("compaction off", cfg.off_budget, 0.8),
                                             ("compaction on", cfg.budget, cfg.threshold)):
                print(f"part 2: {label}", file=sys.stderr)
                sc = prepare(work, label.replace(" ", "-"), modules, answer_chars=300,
                             max_context_tokens=budget, compact_threshold=threshold)
                scenarios.append(sc)
                runs.append(anyio.run(bench_long, label, cfg, sc.settings, sc.store,
                                      sc.server, backend=args.backend))
    finally:
        for sc in scenarios:
            sc.server.close()
            sc.store.close()
        shutil.rmtree(work, ignore_errors=True)
    facts = {**machine(), "backend": args.backend, "openai": openai.__version__,
             "load_average": [round(x, 2) for x in os.getloadavg()]}
    elapsed = time.perf_counter() - started
    if args.json:
        print(json.dumps({
            "config": asdict(cfg), "machine": facts,
            "overhead": [asdict(r) for r in overhead],
            "long_sessions": [asdict(r) for r in runs],
            "elapsed_s": round(elapsed, 1),
        }))
    else:
        print(render(overhead, runs, cfg, facts))
        print(f"\n(total run time {elapsed:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
