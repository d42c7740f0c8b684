#!/usr/bin/env python
"""Benchmark the session store (SQLite, and PostgreSQL when a server is given) against the
design notes' JSON-file store.

Run from the repository root::

    python benchmarks/store.py            # full run (a few minutes on 2 cores)
    python benchmarks/store.py --quick    # smaller sizes, a smoke run (< 30 s)
    python benchmarks/store.py --json --out results/
    python benchmarks/store.py --postgres postgresql://user@host/db   # adds PostgreSQL columns

With ``--postgres URL`` (or ``$AGENT_HARNESS_BENCH_PG``) every agent-harness figure (of every
``--tree`` too) is also measured on the PostgreSQL store, in throwaway schemas of that
database (dropped at the end); without it the benchmark runs on SQLite alone, as before.

Both stores run on scratch directories (under ``--workdir``, default the system temp dir)
that are removed at the end. Timings are wall clock (``time.perf_counter``) with real
``fsync``: neither store's durability settings are touched. Setup (populating sessions) is not
timed. The text is generated from a fixed seed, so every run stores the same sessions.

What is measured (each figure is a median):

* **checkpoint** - append 2 new ~1 KB messages (an assistant tool call and its result) to a
  session already holding N ~1 KB messages, plus a new planning/usage state. For
  agent-harness that is ``store.checkpoint(sid, messages, state=state)`` (one transaction);
  for the baseline it is the notes' ``save_messages`` + ``update(state=...)`` (two whole-file
  rewrites). The first checkpoint after opening the store is excluded from the median.
* **list_sessions** and **search_sessions** over a store of many ~20-message sessions
  (a rare two-word query matching a handful of sessions and one common word).
* **resume** of the largest session on a freshly opened store, what ``harness --resume``
  reads (``info``, ``recover``, ``recent_messages``), then the first checkpoint after it;
  and ``load_session`` (the whole record, as export reads it) on another fresh store.
* **checkpoint inside the run's lease** (a second table): the same checkpoint while the
  session's lease is held around it, as the supervisor holds it for a whole run, so the
  lease is not taken and released per checkpoint.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import math
import os
import platform
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from _json_baseline import JsonSessionStore  # beside this script: run it as benchmarks/store.py

from actors.store import SqliteStore, Store

REPO = Path(__file__).resolve().parent.parent

SEED = 20240611
RARE_WORDS = ("kafka", "rebalance")
RARE_QUERY = "kafka rebalance"
COMMON_QUERY = "error"
BATCH = 2_000  # messages per setup checkpoint of the big sessions
PG_ENV = "AGENT_HARNESS_BENCH_PG"

# -- configuration ------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    """Sizes and repetition counts of one run."""

    name: str
    sizes: tuple[int, ...]  # messages already in the session before a checkpoint
    sessions: int  # sessions in the list/search store
    messages_per_session: int
    checkpoints: int  # measured checkpoints per size (agent-harness); +1 excluded warm-up
    baseline_checkpoints: dict[int, int] = field(default_factory=dict)  # per size, baseline
    reads: int = 7  # list/search repetitions, agent-harness
    baseline_reads: int = 3  # list/search repetitions, baseline
    resumes: int = 5
    baseline_resumes: int = 3
    rare_sessions: int = 6  # sessions holding both rare words
    half_rare_sessions: int = 30  # sessions holding only one of them (each word)


FULL = Config(
    name="full",
    sizes=(100, 2_000, 20_000),
    sessions=2_000,
    messages_per_session=20,
    checkpoints=101,
    baseline_checkpoints={100: 9, 2_000: 7, 20_000: 5},
    baseline_resumes=5,
)
QUICK = Config(
    name="quick",
    sizes=(100, 500, 2_000),
    sessions=200,
    messages_per_session=20,
    checkpoints=21,
    baseline_checkpoints={100: 3, 500: 3, 2_000: 3},
    reads=3,
    baseline_reads=2,
    resumes=3,
    baseline_resumes=2,
    rare_sessions=3,
    half_rare_sessions=6,
)

# -- realistic-looking text from a fixed seed ---------------------------------------------

_COMMON = """
the to and of a in is that for it we this with on be as not are was by at or from have an
can but if so will should all file test error function code run when then use need which
there one would check it's value call return new first also change only just config path
line fix build output so type case make data module class method like now get set time
version update name list into after work before missing import because still add read
step tests failing passes issue user command default again server request response cache
key changes found looks think see string number result each does other same where could
directory project install package dependency local remote branch commit merge review patch
log logs message warning debug trace stack exception raise handler retry timeout connection
database query table index schema migration column row field record session token api
endpoint client library script shell environment variable option flag argument parameter
input format json yaml parse write save load open close start stop wait thread process
async lock queue worker job task plan todo done next remaining investigate inspect confirm
expected actual behaviour regression bug feature refactor cleanup document docs readme
comment variable loop condition branch path root sandbox container image docker deploy
release staging production metrics latency memory disk network port host service health
""".split()  # noqa: SIM905 (a word list reads better as prose)
_ONSETS = ["b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v",
           "w", "z", "br", "cr", "dr", "fl", "gr", "pl", "pr", "sh", "st", "th", "tr", "ch"]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ea", "io", "ou"]
_CODAS = ["", "", "n", "r", "s", "t", "l", "m", "nd", "st", "x", "ck"]
_TOOLS = ("read_file", "write_file", "run_command", "search_code", "list_directory")


def _vocabulary(rng: random.Random, size: int = 3_000) -> list[str]:
    """Real English/dev words first (most frequent), then invented words to ``size``."""
    words = list(dict.fromkeys(_COMMON))
    seen = set(words)
    while len(words) < size:
        word = "".join(
            rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS)
            for _ in range(rng.choice((1, 2, 2, 3)))
        )
        if len(word) > 2 and word not in seen and not any(r in word for r in RARE_WORDS):
            seen.add(word)
            words.append(word)
    return words


class TextGen:
    """Zipf-distributed words from a vocabulary of a few thousand, in sentences."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.words = _vocabulary(self.rng)
        self.cum = list(itertools.accumulate(1 / (rank + 2) for rank in range(len(self.words))))
        self.calls = 0

    def sentence(self) -> str:
        """One sentence of 6-22 words, sometimes naming a file."""
        words = self.rng.choices(self.words, cum_weights=self.cum, k=self.rng.randint(6, 22))
        if self.rng.random() < 0.15:
            words.insert(self.rng.randrange(len(words)), f"`{self.path()}`")
        return " ".join(words).capitalize() + self.rng.choice((".", ".", ".", "?", ":"))

    def text(self, chars: int) -> str:
        """Sentences until about ``chars`` characters."""
        out: list[str] = []
        length = 0
        while length < chars:
            sentence = self.sentence()
            out.append(sentence)
            length += len(sentence) + 1
        return " ".join(out)

    def path(self) -> str:
        """A plausible source-file path."""
        parts = self.rng.choices(self.words[:400], k=self.rng.randint(1, 3))
        return "src/" + "/".join(parts) + self.rng.choice((".py", ".ts", ".md", ".toml"))

    def title(self) -> str:
        """A five-word session title."""
        return " ".join(self.rng.choices(self.words, cum_weights=self.cum, k=5)).capitalize()

    def call_pair(self) -> list[dict[str, Any]]:
        """An assistant message with one tool call and the tool's result (~1 KB each)."""
        self.calls += 1
        call_id = f"call_{self.calls:06d}{self.rng.getrandbits(32):08x}"
        arguments = json.dumps({"path": self.path(), "note": self.text(160)})
        return [
            {
                "role": "assistant",
                "content": self.text(700),
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": self.rng.choice(_TOOLS), "arguments": arguments},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call_id, "content": self.text(1_000)},
        ]

    def conversation(self, n: int) -> list[dict[str, Any]]:
        """``n`` messages: a system prompt, then user turns with tool calls and replies."""
        messages: list[dict[str, Any]] = [{"role": "system", "content": self.text(1_000)}]
        while len(messages) < n:
            messages.append({"role": "user", "content": self.text(1_000)})
            for _ in range(self.rng.randint(1, 4)):
                messages.extend(self.call_pair())
            messages.append({"role": "assistant", "content": self.text(1_000)})
        del messages[n:]
        if messages[-1].get("tool_calls"):  # never leave a call open at the end
            messages[-1] = {"role": "assistant", "content": self.text(1_000)}
        return messages

    def state(self, step: int) -> dict[str, Any]:
        """A planning/usage state like the harness checkpoints."""
        return {
            "scratchpad": self.text(300),
            "todos": [
                {"text": self.text(60), "done": i < step % 5, "retries": 0} for i in range(5)
            ],
            "tool_calls": step,
            "total_tokens_in": 1_200 * step,
            "total_tokens_out": 300 * step,
            "total_cost_usd": round(0.004 * step, 6),
            "calls": step,
        }


# -- timing helpers -----------------------------------------------------------------------


def _timed(fn: Callable[[], object]) -> float:
    """Wall-clock seconds of one call."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _median(fn: Callable[[], object], repeats: int) -> tuple[float, list[float]]:
    """The median of ``repeats`` timed calls, and the samples."""
    samples = [_timed(fn) for _ in range(repeats)]
    return statistics.median(samples), samples


def _log(text: str) -> None:
    """Progress goes to stderr, so stdout holds only the results."""
    print(text, file=sys.stderr, flush=True)


def _fmt(seconds: float) -> str:
    """A duration with a readable unit."""
    if round(seconds * 1e6) < 1000:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.{1 if seconds < 0.1 else 0}f} ms"
    return f"{seconds:.2f} s"


def _times(factor: float) -> str:
    """A speed-up factor: one decimal below 10, else a whole number."""
    return f"{factor:.1f}x" if factor < 10 else f"{factor:,.0f}x"


# -- the PostgreSQL database (optional) ---------------------------------------------------


class Postgres:
    """The PostgreSQL columns' database: one throwaway schema per part of the benchmark."""

    def __init__(self, url: str) -> None:
        import psycopg

        self.url = url
        self._admin = psycopg.connect(url, autocommit=True)
        self.version = str(self._admin.info.server_version)
        self._admin.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public")
        self._schemas: dict[str, str] = {}

    def store(self, part: str, memory_dir: Path) -> Store:
        """A store on the schema of ``part`` (created empty on first use)."""
        from urllib.parse import quote

        from actors.store import PostgresStore

        schema = self._schemas.get(part)
        if schema is None:
            schema = self._schemas[part] = f"bench_{part}_{os.getpid()}"
            self._admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            self._admin.execute(f'CREATE SCHEMA "{schema}"')
        option = quote(f"-csearch_path={schema}", safe="")
        url = f"{self.url}{'&' if '?' in self.url else '?'}options={option}"
        return PostgresStore(url, memory_dir)

    def analyze(self, part: str) -> None:
        """Gather the planner's statistics now, as autovacuum does soon after a bulk load,
        so that every run measures the same plans."""
        schema = self._schemas[part]
        for table in ("sessions", "transcript", "context", "message_text", "session_text"):
            self._admin.execute(f'ANALYZE "{schema}".{table}')

    def close(self) -> None:
        for schema in self._schemas.values():
            self._admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        self._admin.close()


# -- the benchmark ------------------------------------------------------------------------


@dataclass
class Row:
    """One line of the table."""

    key: str
    operation: str
    harness_s: float
    baseline_s: float
    harness_samples: list[float] = field(default_factory=list)
    baseline_samples: list[float] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    pg_s: float | None = None  # the same operation on the PostgreSQL store
    pg_samples: list[float] = field(default_factory=list)

    @property
    def speedup(self) -> float:
        """How many times faster agent-harness is than the baseline."""
        return self.baseline_s / self.harness_s


def bench_list_search(
    cfg: Config, work: Path, gen: TextGen, pg: Postgres | None = None
) -> list[Row]:
    """list_sessions and the two search_sessions queries over ``cfg.sessions`` sessions."""
    ah_dir, js_dir = work / "harness-many", work / "notes-many"
    rng = random.Random(SEED + 1)
    both = set(rng.sample(range(cfg.sessions), cfg.rare_sessions))
    rest = [i for i in range(cfg.sessions) if i not in both]
    only = rng.sample(rest, 2 * cfg.half_rare_sessions)
    only_first, only_second = set(only[: cfg.half_rare_sessions]), set(
        only[cfg.half_rare_sessions :]
    )
    planted = {
        "both": "The kafka consumer group keeps failing during a rebalance after the deploy.",
        "first": "We also looked at the kafka topic retention settings.",
        "second": "The shard rebalance finished and the nodes look healthy.",
    }
    store = SqliteStore(ah_dir)
    pg_store = None if pg is None else pg.store("many", work / "pg-memory")
    baseline = JsonSessionStore(js_dir)
    _log(f"setup: {cfg.sessions:,} sessions of {cfg.messages_per_session} messages")
    base_time = time.time() - 86_400 * 30
    for i in range(cfg.sessions):
        messages = gen.conversation(cfg.messages_per_session)
        kind = ("both" if i in both else "first" if i in only_first
                else "second" if i in only_second else None)
        if kind is not None:
            users = [m for m in messages if m["role"] == "user"]
            target = rng.choice(users)
            target["content"] += " " + planted[kind]
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(base_time + 600 * i))
        record = {
            "id": f"bench{i:05d}",
            "created_at": stamp,
            "updated_at": stamp,
            "title": gen.title(),
            "summary": gen.text(300),
            "archived": False,
            "status": "saved",
            "project_root": "/home/dev/project",
            "state": gen.state(i % 40),
            "messages": messages,
            "transcript": list(messages),
            "compactions": [],
        }
        store.import_record(record)
        if pg_store is not None:
            pg_store.import_record(record)
        baseline.put_record(record)

    if pg is not None:
        pg.analyze("many")

    def pg_median(operation: Callable[[Store], object]) -> tuple[float | None, list[float]]:
        if pg_store is None:
            return None, []
        return _median(lambda: operation(pg_store), cfg.reads)

    rows = []
    _log("agent-harness / notes baseline: list_sessions")
    ah_median, ah_samples = _median(store.list_sessions, cfg.reads)
    js_median, js_samples = _median(baseline.list_sessions, cfg.baseline_reads)
    pg_list, pg_list_samples = pg_median(lambda s: s.list_sessions())
    listed = (len(store.list_sessions()), len(baseline.list_sessions()))
    rows.append(Row("list", f"list_sessions, {cfg.sessions:,} sessions", ah_median, js_median,
                    ah_samples, js_samples, {"listed": listed}, pg_list, pg_list_samples))
    for key, query in (("search_rare", RARE_QUERY), ("search_common", COMMON_QUERY)):
        _log(f"agent-harness / notes baseline: search_sessions({query!r})")
        ah_median, ah_samples = _median(lambda q=query: store.search_sessions(q), cfg.reads)
        js_median, js_samples = _median(
            lambda q=query: baseline.search_sessions(q), cfg.baseline_reads
        )
        pg_search, pg_search_samples = pg_median(lambda s, q=query: s.search_sessions(q))
        ah_all = {r["id"] for r in store.search_sessions(query, limit=cfg.sessions)}
        js_all = {r["id"] for r in baseline.search_sessions(query)}
        returned = len(store.search_sessions(query))
        extra: dict[str, Any] = {
            "matches_harness": len(ah_all),
            "matches_baseline": len(js_all),
            "same_matches": ah_all == js_all,
            "returned_harness": returned,
        }
        if pg_store is not None:
            pg_ranked = [r["id"] for r in pg_store.search_sessions(query, limit=cfg.sessions)]
            ah_ranked = [r["id"] for r in store.search_sessions(query, limit=cfg.sessions)]
            extra["pg_same_ranking"] = pg_ranked == ah_ranked
        rows.append(
            Row(
                key,
                f'search_sessions "{query}", {cfg.sessions:,} sessions',
                ah_median,
                js_median,
                ah_samples,
                js_samples,
                extra,
                pg_search,
                pg_search_samples,
            )
        )
    store.close()
    if pg_store is not None:
        pg_store.close()
    return rows


@dataclass
class Target:
    """One stated performance target and whether this run met it."""

    name: str
    value: str
    met: bool


# -- checkpoints side by side: this store, its peers and the floor -------------------------


def _stats(samples: list[float]) -> dict[str, float]:
    """Median, mean and 95th percentile of a list of seconds."""
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]
    return {"median": statistics.median(ordered), "mean": statistics.fmean(ordered),
            "p95": p95, "n": len(ordered)}


class _Peer:
    """One way of saving a checkpoint (2 messages and a state) of a session of N messages."""

    name = ""

    def __init__(self, work: Path) -> None:
        self.work = work

    def setup(self, n: int, messages: list[dict[str, Any]]) -> None:
        raise NotImplementedError

    def checkpoint(self, n: int, new: list[dict[str, Any]], state: dict[str, Any]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


class JsonlPeer(_Peer):
    """Append the new messages and the state as JSON lines, then one ``fdatasync``."""

    name = "JSONL + fsync"

    def __init__(self, work: Path) -> None:
        self.dir = work / "jsonl"
        self.dir.mkdir()
        self.files: dict[int, Any] = {}

    def setup(self, n: int, messages: list[dict[str, Any]]) -> None:
        f = open(self.dir / f"{n}.jsonl", "a", encoding="utf-8")  # noqa: SIM115
        f.writelines(json.dumps(m, ensure_ascii=False) + "\n" for m in messages)
        f.flush()
        os.fsync(f.fileno())
        self.files[n] = f

    def checkpoint(self, n: int, new: list[dict[str, Any]], state: dict[str, Any]) -> None:
        f = self.files[n]
        f.write("".join(json.dumps(m, ensure_ascii=False) + "\n" for m in new)
                + json.dumps({"state": state}, ensure_ascii=False) + "\n")
        f.flush()
        os.fdatasync(f.fileno())

    def close(self) -> None:
        for f in self.files.values():
            f.close()


class FsyncPeer(_Peer):
    """The floor: overwrite 64 bytes in place, then one ``fdatasync``."""

    name = "bare fsync"

    def __init__(self, work: Path) -> None:
        self.fd = os.open(work / "floor", os.O_RDWR | os.O_CREAT, 0o600)
        os.write(self.fd, b"\0" * 4096)
        os.fsync(self.fd)

    def setup(self, n: int, messages: list[dict[str, Any]]) -> None:
        pass

    def checkpoint(self, n: int, new: list[dict[str, Any]], state: dict[str, Any]) -> None:
        os.pwrite(self.fd, os.urandom(64), 0)
        os.fdatasync(self.fd)

    def close(self) -> None:
        os.close(self.fd)


class PlainSqlitePeer(_Peer):
    """A plain table, one ``INSERT`` per message and one ``UPDATE`` of the state, in one
    transaction (WAL, ``synchronous=FULL``)."""

    name = "plain SQLite table"

    def __init__(self, work: Path) -> None:
        self.conn = sqlite3.connect(work / "plain.sqlite3", isolation_level=None)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("PRAGMA synchronous = FULL")
        self.conn.execute("CREATE TABLE messages (id INTEGER PRIMARY KEY, session INTEGER,"
                          " body TEXT)")
        self.conn.execute("CREATE INDEX messages_session ON messages (session, id)")
        self.conn.execute("CREATE TABLE sessions (id INTEGER PRIMARY KEY, state TEXT)")

    def setup(self, n: int, messages: list[dict[str, Any]]) -> None:
        with self.conn:
            self.conn.execute("BEGIN")
            self.conn.execute("INSERT INTO sessions VALUES (?, '{}')", (n,))
            self.conn.executemany("INSERT INTO messages (session, body) VALUES (?, ?)",
                                  [(n, json.dumps(m)) for m in messages])

    def checkpoint(self, n: int, new: list[dict[str, Any]], state: dict[str, Any]) -> None:
        conn = self.conn
        conn.execute("BEGIN")
        for m in new:
            conn.execute("INSERT INTO messages (session, body) VALUES (?, ?)",
                         (n, json.dumps(m)))
        conn.execute("UPDATE sessions SET state = ? WHERE id = ?", (json.dumps(state), n))
        conn.execute("COMMIT")

    def close(self) -> None:
        self.conn.close()


class AgentsSessionPeer(_Peer):
    """The OpenAI Agents SDK's ``SQLiteSession`` (WAL, ``synchronous=FULL`` by default):
    ``add_items`` of the new messages. Timed without its hop to a worker thread (its
    ``_insert_items`` + ``commit``, what ``add_items`` runs in the thread), as this store's
    checkpoints are timed; the hop is measured on its own (``to_thread``)."""

    name = "Agents SDK SQLiteSession"

    def __init__(self, work: Path) -> None:
        from agents import SQLiteSession

        self.cls = SQLiteSession
        self.path = work / "agents.sqlite3"
        self.sessions: dict[int, Any] = {}
        self.loop = asyncio.new_event_loop()

    def setup(self, n: int, messages: list[dict[str, Any]]) -> None:
        session = self.cls(f"s{n}", self.path)
        self.loop.run_until_complete(session.add_items(messages))
        self.sessions[n] = session

    def checkpoint(self, n: int, new: list[dict[str, Any]], state: dict[str, Any]) -> None:
        session = self.sessions[n]
        with session._write_connection() as conn:  # the body of add_items, in this thread
            session._insert_items(conn, new)
            conn.commit()

    def thread_hop(self) -> float:
        """Seconds of ``asyncio.to_thread`` of a no-op (what ``add_items`` adds)."""
        samples = []
        for _ in range(50):
            start = time.perf_counter()
            self.loop.run_until_complete(asyncio.to_thread(lambda: None))
            samples.append(time.perf_counter() - start)
        return statistics.median(samples)

    def close(self) -> None:
        for session in self.sessions.values():
            session.close()
        self.loop.close()


PEERS: dict[str, type[_Peer]] = {cls.name: cls for cls in (
    FsyncPeer, JsonlPeer, PlainSqlitePeer, AgentsSessionPeer)}


class _Child:
    """A program of this benchmark in a child process, answering one JSON line per line
    it is sent; its first line says it is ready."""

    def __init__(self, label: str, argv: list[str], cwd: Path, env: Mapping[str, str]) -> None:
        self.label = label
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, env=dict(env), cwd=cwd)
        self.ready = json.loads(self._line())

    def _line(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.label} child ended early")
        return line

    def ask(self, *words: object) -> Any:
        assert self.proc.stdin is not None
        self.proc.stdin.write(" ".join(map(str, words)) + "\n")
        self.proc.stdin.flush()
        return json.loads(self._line())

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.ask("quit")
        self.proc.wait(timeout=60)


class HarnessChild(_Child):
    """This store (of one source tree) in a child process, driven line by line, so that two
    trees (before and after a change) are measured in one run, interleaved."""

    def __init__(self, tree: Path, label: str, work: Path, sizes: tuple[int, ...],
                 postgres: str | None = None) -> None:
        argv = [sys.executable, __file__, "--child", ",".join(map(str, sizes)),
                "--workdir", str(work)]
        if postgres:
            argv += ["--postgres", postgres]
        super().__init__(label, argv, tree, {**os.environ, "PYTHONPATH": str(tree)})


def _commands() -> Iterator[list[str]]:
    """A child's commands, one line of words each, until ``quit`` (answered here)."""
    for line in sys.stdin:
        words = line.split()
        if words[0] == "quit":
            print("{}", flush=True)
            return
        yield words


def child_main(sizes: tuple[int, ...], work: Path, postgres: str | None) -> int:
    """The child: build the sessions, then answer ``ckpt N I``, ``resume N`` and ``quit``.

    Checkpoints go the supervisor's way: inside the session's lease held for the whole run,
    ``store.append`` of the new messages where the tree has it, else ``store.checkpoint`` of
    the whole context (the same list, extended). Each answer is one JSON line.
    """
    from actors.store import SqliteStore

    gen = TextGen(SEED)
    memory = work / f"memory-{os.getpid()}"
    pg = Postgres(postgres) if postgres else None

    def open_store() -> Store:
        return pg.store("ckpt", memory) if pg is not None else SqliteStore(memory)

    setup = open_store()
    sessions: dict[int, tuple[str, list[dict[str, Any]]]] = {}
    for n in sizes:
        messages = gen.conversation(n)
        sid = setup.create_session(messages=messages[:BATCH], title=gen.title())
        for end in range(BATCH, n, BATCH):
            setup.checkpoint(sid, messages[: end + BATCH])
        sessions[n] = (sid, messages)
    if hasattr(setup, "catch_up_index"):
        setup.catch_up_index()
    # The setup's store stays open, as the peers' connections do, so every SQLite store is
    # measured with its WAL grown (SQLite deletes the WAL when its last connection closes);
    # the "cold WAL" figure measures a store nobody else has open on its own.
    pairs = {n: [gen.call_pair() for _ in range(400)] for n in sizes}
    first_pairs = pairs[sizes[0]]
    states = [gen.state(step) for step in range(1, 64)]
    store = open_store()
    leases = contextlib.ExitStack()
    for sid, _ in sessions.values():
        leases.enter_context(store.lease(sid))
    appends = hasattr(store, "append")
    apply_journal = getattr(store, "apply_journal", None)
    print(json.dumps({"appends": appends, "journal": apply_journal is not None}), flush=True)
    for words in _commands():
        if words[0] == "cold":  # checkpoints of a store nobody else has open: a new WAL
            if pg is not None:
                print("{}", flush=True)
            else:
                cold_dir = work / f"cold-{os.getpid()}"
                context = gen.conversation(100)
                with SqliteStore(cold_dir) as cold:
                    cold_sid = cold.create_session(messages=context)
                    cold.catch_up_index()
                samples = []
                with SqliteStore(cold_dir) as cold, cold.lease(cold_sid):
                    for i in range(int(words[1])):
                        new = first_pairs[i % 400]
                        start = time.perf_counter()
                        if appends:
                            cold.append(cold_sid, new, at=len(context),  # type: ignore[attr-defined]
                                        state=states[i % len(states)])
                            context.extend(new)
                        else:
                            context.extend(new)
                            cold.checkpoint(cold_sid, context, state=states[i % len(states)])
                        if hasattr(cold, "apply_journal"):  # a tree with schema 8's journal
                            cold.apply_journal()
                        samples.append(time.perf_counter() - start)
                print(json.dumps({"samples": samples}), flush=True)
            continue
        n = int(words[1])
        sid, messages = sessions[n]
        if words[0] == "ckpt":
            new = pairs[n][int(words[2]) % len(pairs[n])]
            state = states[int(words[2]) % len(states)]
            start = time.perf_counter()
            if appends:
                store.append(sid, new, at=len(messages), state=state)  # type: ignore[attr-defined]
                messages.extend(new)
            else:
                messages.extend(new)
                store.checkpoint(sid, messages, state=state)
            seconds = time.perf_counter() - start
            # A tree whose checkpoint was a journal row first (schema 8, main before the one
            # write path) applied it to the tables in a second durable transaction, off the
            # turn's path: part of what the checkpoint costs in all, timed apart.
            applied = 0.0
            if apply_journal is not None:
                start = time.perf_counter()
                apply_journal()
                applied = time.perf_counter() - start
            print(json.dumps({"s": seconds, "apply": applied}), flush=True)
        elif words[0] == "resume":  # a resume in a new store instance, and its first save
            fresh = open_store()
            try:
                with fresh.lease(sid):
                    # what `harness --resume` reads: the row, the context (recovered), the
                    # last exchanges it shows
                    start = time.perf_counter()
                    fresh.info(sid)
                    context = fresh.recover(sid)
                    fresh.recent_messages(sid, 6)
                    loaded = time.perf_counter() - start
                    new = gen.call_pair()
                    start = time.perf_counter()
                    if appends:  # the supervisor's way
                        fresh.append(sid, new, at=len(context))  # type: ignore[attr-defined]
                    else:
                        fresh.checkpoint(sid, [*context, *new])
                    first = time.perf_counter() - start
                    messages.extend(new)
                other = open_store()  # the whole record, as export reads it
                try:
                    start = time.perf_counter()
                    other.load_session(sid)
                    record = time.perf_counter() - start
                finally:
                    other.close()
            finally:
                fresh.close()
            print(json.dumps({"load": loaded, "first": first, "record": record}), flush=True)
    leases.close()
    store.close()
    setup.close()
    if pg is not None:
        pg.close()
    return 0


class PeerChild(_Child):
    """One peer in a child process of its own, driven line by line as the trees' stores
    are (:class:`HarnessChild`): every column of the table pays the same wake-up of a
    sleeping process before each checkpoint, and is timed inside its own process."""

    def __init__(self, cls: type[_Peer], work: Path, sizes: tuple[int, ...]) -> None:
        self.name = cls.name
        super().__init__(cls.name, [sys.executable, __file__, "--peer-child", cls.__name__,
                                    "--workdir", str(work), "--sizes",
                                    ",".join(map(str, sizes))], REPO, os.environ)


def peer_child_main(name: str, sizes: tuple[int, ...], work: Path) -> int:
    """A peer's child: set up every size, then answer ``ckpt N I`` (the seconds of one
    checkpoint), ``hop`` (SQLiteSession's thread hop) and ``quit``."""
    cls = next(c for c in PEERS.values() if c.__name__ == name)
    try:
        peer = cls(work)
    except ImportError as exc:
        print(json.dumps({"missing": str(exc)}), flush=True)
        return 0
    gen = TextGen(SEED)
    for n in sizes:
        peer.setup(n, gen.conversation(n))
    pairs = [gen.call_pair() for _ in range(64)]
    states = [gen.state(step) for step in range(1, 64)]
    print(json.dumps({"ready": True}), flush=True)
    for words in _commands():
        if words[0] == "hop":
            hop = peer.thread_hop() if isinstance(peer, AgentsSessionPeer) else None
            print(json.dumps({"s": hop}), flush=True)
            continue
        n, i = int(words[1]), int(words[2])
        new, state = pairs[i % len(pairs)], states[i % len(states)]
        start = time.perf_counter()
        peer.checkpoint(n, new, state)
        print(json.dumps({"s": time.perf_counter() - start}), flush=True)
    peer.close()
    return 0


def bench_peers(cfg: Config, work: Path, trees: list[tuple[str, Path]],
                postgres: str | None) -> dict[str, Any]:
    """Checkpoints of every store at every size, interleaved round by round; resumes. Every
    store and every peer runs in a child process of its own (:class:`HarnessChild`,
    :class:`PeerChild`)."""
    _log(f"setup: sessions of {', '.join(f'{n:,}' for n in cfg.sizes)} messages, per store")
    children = [HarnessChild(tree, label, work, cfg.sizes) for label, tree in trees]
    if postgres:  # every tree on PostgreSQL too, so that a change is seen on both backends
        children += [HarnessChild(tree, f"{label}, PostgreSQL", work, cfg.sizes, postgres)
                     for label, tree in trees]
    peers: list[PeerChild] = []
    for cls in PEERS.values():
        peer = PeerChild(cls, work, cfg.sizes)
        if "missing" in peer.ready:
            _log("the Agents SDK is not installed (pip install -e '.[bench]'): column left out")
            peer.close()
        else:
            peers.append(peer)
    names = [c.label for c in children] + [p.name for p in peers]
    samples: dict[str, dict[int, list[float]]] = {name: {n: [] for n in cfg.sizes}
                                                  for name in names}
    applies: dict[str, dict[int, list[float]]] = {c.label: {n: [] for n in cfg.sizes}
                                                  for c in children}  # the first commit
    # Round-robin over sizes and stores alike, so that a change in the machine's load falls
    # on every column and every size, and the growth figures compare like with like.
    _log(f"checkpoints at {', '.join(f'{n:,}' for n in cfg.sizes)} messages: "
         f"{cfg.checkpoints} rounds")
    for i in range(cfg.checkpoints + 1):  # round 0 is a warm-up, not counted
        for n in cfg.sizes:
            for child in children:
                answer = child.ask("ckpt", n, i)
                if i:  # the durable work in all: the checkpoint, and a journal's apply
                    samples[child.label][n].append(answer["s"] + answer.get("apply", 0.0))
                    applies[child.label][n].append(answer["s"])
            for peer in peers:
                seconds = peer.ask("ckpt", n, i)["s"]
                if i:
                    samples[peer.name][n].append(seconds)
    largest = cfg.sizes[-1]
    _log(f"resume of the {largest:,}-message session, then a save; load_session")
    resumes: dict[str, list[dict[str, float]]] = {c.label: [] for c in children}
    for _ in range(cfg.resumes):
        for child in children:
            resumes[child.label].append(child.ask("resume", largest))
    cold = {c.label: _stats(r["samples"]) for c in children
            if (r := c.ask("cold", cfg.checkpoints)).get("samples")}
    hop = next((p.ask("hop")["s"] for p in peers
                if p.name == AgentsSessionPeer.name), None)
    appends = {c.label: c.ready["appends"] for c in children}
    journals = {c.label: c.ready.get("journal", False) for c in children}
    for child in children:
        child.close()
    for peer in peers:
        peer.close()
    return {
        "names": names,
        "checkpoints": {name: {n: _stats(s) for n, s in by_n.items()}
                        for name, by_n in samples.items()},
        "resume": {label: {key: statistics.median(r.get(key, math.nan) for r in runs)
                           for key in ("load", "first", "record")}
                   for label, runs in resumes.items()},
        "thread_hop_s": hop,
        "on_path": {label: {n: _stats(s) for n, s in by_n.items()}
                    for label, by_n in applies.items()
                    if journals[label]},  # a tree whose tables followed in a second commit
        "cold": cold,
        "appends": appends,
    }


def render_peers(result: dict[str, Any], cfg: Config) -> str:
    """The checkpoint tables (median / mean / p95 per size) and the resume table."""
    names = result["names"]
    lines = [
        "Checkpoint, its durable work in all (+2 messages of ~1 KB and a state), "
        "median / mean / p95:",
        "",
        "| messages | " + " | ".join(names) + " |",
        "|---:|" + "---:|" * len(names),
    ]
    for n in cfg.sizes:
        cells = []
        for name in names:
            s = result["checkpoints"][name][n]
            cells.append(f"{_fmt(s['median'])} / {_fmt(s['mean'])} / {_fmt(s['p95'])}")
        lines.append(f"| {n:,} | " + " | ".join(cells) + " |")
    small, large = cfg.sizes[0], cfg.sizes[-1]
    lines += ["", "| | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    growth = [result["checkpoints"][nm][large]["median"] / result["checkpoints"][nm][small][
        "median"] for nm in names]
    lines.append(f"| growth {small:,} -> {large:,} (medians) | "
                 + " | ".join(f"{g:.2f}x" for g in growth) + " |")
    spread = [max(result["checkpoints"][nm][n]["p95"] / result["checkpoints"][nm][n]["median"]
                  for n in cfg.sizes) for nm in names]
    lines.append("| worst p95 / median | " + " | ".join(f"{s:.1f}x" for s in spread) + " |")
    if result["thread_hop_s"] is not None:
        lines.append(f"\n(SQLiteSession's add_items also hops to a worker thread: "
                     f"{_fmt(result['thread_hop_s'])} here, not counted above; so does "
                     "this store's checkpoint writer.)")
    for label, by_n in result.get("on_path", {}).items():
        cells = ", ".join(f"{_fmt(st['median'])} / {_fmt(st['mean'])} / {_fmt(st['p95'])} at "
                          f"{n:,}" for n, st in by_n.items())
        lines.append(f"\n{label}: a checkpoint journal's row alone (the commit a turn waited "
                     "on; the figures above add the second durable transaction that applied "
                     f"it to the tables), median / mean / p95: {cells}.")
    for label, st in result["cold"].items():
        lines.append(f"\n{label}, a cold WAL (a store no other connection has open, its first "
                     f"{st['n']} checkpoints after opening, at {small:,} messages): "
                     f"{_fmt(st['median'])} / {_fmt(st['mean'])} / {_fmt(st['p95'])}.")
    resume = result["resume"]
    lines += ["", f"Resume of the {large:,}-message session in a new store instance "
              "(medians):", "", "| | " + " | ".join(resume) + " |",
              "|---|" + "---:|" * len(resume),
              "| resume (info + recover + recent_messages) | " + " | ".join(
                  _fmt(r["load"]) for r in resume.values()) + " |",
              "| the first checkpoint after it | " + " | ".join(
                  _fmt(r["first"]) for r in resume.values()) + " |",
              "| load_session (the whole record, every message parsed) | " + " | ".join(
                  "–" if math.isnan(r["record"]) else _fmt(r["record"])
                  for r in resume.values()) + " |"]
    return "\n".join(lines)


def peer_targets(result: dict[str, Any], cfg: Config, label: str) -> list[Target]:
    """The issue's targets for this store's checkpoints against its peers."""
    ck = result["checkpoints"]
    small, large = cfg.sizes[0], cfg.sizes[-1]
    ours = ck[label]
    out = []
    worst = max(ours[n]["median"] / ck["JSONL + fsync"][n]["median"] for n in cfg.sizes)
    out.append(Target("median within 2x of JSONL + fsync at every size", f"{worst:.2f}x",
                      worst <= 2.0))
    if "Agents SDK SQLiteSession" in ck:
        ratio = max(ours[n]["median"] / ck["Agents SDK SQLiteSession"][n]["median"]
                    for n in cfg.sizes)
        out.append(Target("median within 1.3x of SQLiteSession at every size (worst)",
                          f"{ratio:.2f}x", ratio <= 1.3))
    growth = ours[large]["median"] / ours[small]["median"]
    out.append(Target(f"growth {small:,} -> {large:,} under 1.2x", f"{growth:.2f}x",
                      growth < 1.2))
    spread = max(ours[n]["p95"] / ours[n]["median"] for n in cfg.sizes)
    out.append(Target("p95 under 3x the median at every size", f"{spread:.1f}x", spread < 3))
    load = result["resume"][label]["load"]
    out.append(Target(f"resume of {large:,} messages under 100 ms", _fmt(load), load < 0.1))
    return out


def targets(rows: dict[str, Row], pg: bool) -> list[Target]:
    """The listing and search targets against this run's figures."""
    out = []
    for key in ("list", "search_rare", "search_common"):
        row = rows[key]
        out.append(Target(f"{row.operation} under 50 ms", _fmt(row.harness_s),
                          row.harness_s < 0.050))
        if pg and row.pg_s is not None:
            out.append(Target(f"PostgreSQL: {row.operation} under 50 ms", _fmt(row.pg_s),
                              row.pg_s < 0.050))
    return out


def machine(pg: Postgres | None = None) -> dict[str, Any]:
    """Facts about the machine and runtime that the figures depend on."""
    facts = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "platform": platform.platform(),
    }
    if pg is not None:
        major, minor = divmod(int(pg.version), 10_000)
        facts["postgresql"] = f"{major}.{minor}"
    return facts


def render(rows: list[Row], with_pg: bool) -> str:
    """Listing and search beside the notes' JSON-file baseline, as Markdown."""
    if with_pg:
        lines = ["| operation | SQLite | PostgreSQL | notes baseline | speed-up (SQLite) |",
                 "|---|---:|---:|---:|---:|"]
    else:
        lines = ["| operation | agent-harness | notes baseline | speed-up |",
                 "|---|---:|---:|---:|"]
    for row in rows:
        pg = f" {_fmt(row.pg_s)} |" if row.pg_s is not None else (" – |" if with_pg else "")
        lines.append(f"| {row.operation} | {_fmt(row.harness_s)} |{pg} {_fmt(row.baseline_s)} "
                     f"| {_times(row.speedup)} |")
    notes = []
    for row in rows:
        if "matches_baseline" in row.extra:
            extra = row.extra
            notes.append(
                f"{row.operation}: {extra['matches_harness']} matching sessions "
                f"(baseline: {extra['matches_baseline']}, same set: {extra['same_matches']}); "
                f"agent-harness returns the best {extra['returned_harness']} (limit 50)."
            )
            if "pg_same_ranking" in extra:
                notes.append(f"  PostgreSQL ranks every match as SQLite does: "
                             f"{extra['pg_same_ranking']}.")
    return "\n".join([*lines, "", *notes])


def render_targets(checks: list[Target]) -> str:
    lines = ["| target | this run | met? |", "|---|---:|---|"]
    for check in checks:
        lines.append(f"| {check.name} | {check.value} | {'yes' if check.met else 'NO'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, run the benchmark, print (and optionally save) the results."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run)")
    parser.add_argument("--out", type=Path, metavar="DIR",
                        help="also write store-benchmark.md and store-benchmark.json here")
    parser.add_argument("--json", action="store_true",
                        help="print the figures as one JSON object at the end")
    parser.add_argument("--workdir", type=Path, metavar="DIR",
                        help="where the scratch stores go (default: the system temp dir)")
    parser.add_argument("--postgres", metavar="URL", default=os.environ.get(PG_ENV) or None,
                        help="also measure the PostgreSQL store in this database (throwaway "
                        f"schemas, dropped at the end; default: ${PG_ENV})")
    parser.add_argument("--tree", type=Path, action="append", default=[], metavar="DIR",
                        help="another checkout whose store to measure beside this one's "
                        "(repeatable; e.g. the commit before a change)")
    parser.add_argument("--skip-reads", action="store_true",
                        help="only the checkpoints and the resume (no listing or search)")
    parser.add_argument("--child", metavar="SIZES", help=argparse.SUPPRESS)
    parser.add_argument("--peer-child", metavar="CLASS", help=argparse.SUPPRESS)
    parser.add_argument("--sizes", metavar="SIZES", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.peer_child:
        return peer_child_main(args.peer_child, tuple(int(n) for n in args.sizes.split(",")),
                               args.workdir)
    if args.child:
        return child_main(tuple(int(n) for n in args.child.split(",")), args.workdir,
                          args.postgres)
    cfg = QUICK if args.quick else FULL
    started = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="store-bench-", dir=args.workdir))
    pg = Postgres(args.postgres) if args.postgres and not args.skip_reads else None
    trees = [("this store", REPO), *((f"{t.name}", t.resolve()) for t in args.tree)]
    try:
        peers = bench_peers(cfg, work, trees, args.postgres)
        read_rows = [] if args.skip_reads else bench_list_search(cfg, work, TextGen(SEED), pg)
        facts = machine(pg)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if pg is not None:
            pg.close()
    checks = peer_targets(peers, cfg, "this store")
    if read_rows:
        checks += targets({row.key: row for row in read_rows}, pg is not None)
    server = f"; PostgreSQL {facts['postgresql']}" if "postgresql" in facts else ""
    parts = [
        f"Run: {cfg.name}; {facts['cpus']} CPUs (load average {os.getloadavg()[0]:.1f}); "
        f"Python {facts['python']}; SQLite {facts['sqlite']}{server}; {facts['platform']}",
        "", render_peers(peers, cfg),
    ]
    if read_rows:
        parts += ["", render(read_rows, pg is not None)]
    parts += ["", render_targets(checks)]
    table = "\n".join(parts)
    elapsed = time.perf_counter() - started
    print(table)
    print(f"\n(total run time {elapsed:.0f} s)")
    result = {
        "config": asdict(cfg),
        "machine": facts,
        "checkpoints": peers,
        "rows": [{**asdict(row), "speedup": row.speedup} for row in read_rows],
        "targets": [asdict(check) for check in checks],
        "all_targets_met": all(check.met for check in checks),
        "elapsed_s": elapsed,
    }
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "store-benchmark.md").write_text(table + "\n", encoding="utf-8")
        (args.out / "store-benchmark.json").write_text(
            json.dumps(result, indent=2) + "\n", encoding="utf-8"
        )
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
