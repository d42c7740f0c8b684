#!/usr/bin/env python
"""Benchmark the session store (SQLite, and PostgreSQL when a server is given) against the
design notes' JSON-file store.

Run from the repository root::

    python benchmarks/store.py            # full run (a few minutes on 2 cores)
    python benchmarks/store.py --quick    # smaller sizes, a smoke run (< 30 s)
    python benchmarks/store.py --json --out results/
    python benchmarks/store.py --postgres postgresql://user@host/db   # adds PostgreSQL columns

With ``--postgres URL`` (or ``$AGENT_HARNESS_BENCH_PG``) every agent-harness figure is also
measured on the PostgreSQL store, in throwaway schemas of that database (dropped at the end);
without it the benchmark runs on SQLite alone, as before.

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
* **load_session + recover** of the largest session, on a freshly opened store (a resume).
* **checkpoint inside the run's lease** (a second table): the same checkpoint while the
  session's lease is held around it, as the supervisor holds it for a whole run, so the
  lease is not taken and released per checkpoint.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from _json_baseline import JsonSessionStore  # beside this script: run it as benchmarks/store.py

from actors.store import SqliteStore, Store

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
    checkpoints=21,
    baseline_checkpoints={100: 9, 2_000: 7, 20_000: 5},
    baseline_resumes=5,
)
QUICK = Config(
    name="quick",
    sizes=(100, 500, 2_000),
    sessions=200,
    messages_per_session=20,
    checkpoints=9,
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


def bench_checkpoints(
    cfg: Config, work: Path, gen: TextGen, pg: Postgres | None = None
) -> tuple[list[Row], Row, list[Row]]:
    """Checkpoint rows per size, the load_session + recover row of the largest session, and
    the rows of checkpoints inside the run's lease."""
    ah_dir, js_dir = work / "harness-ckpt", work / "notes-ckpt"
    sessions: dict[int, tuple[str, list[dict[str, Any]]]] = {}
    extra_pairs: dict[int, list[list[dict[str, Any]]]] = {}
    stores: dict[str, Callable[[], Store]] = {"sqlite": lambda: SqliteStore(ah_dir)}
    if pg is not None:
        stores["postgresql"] = lambda: pg.store("ckpt", work / "pg-memory")
    opened = {kind: make() for kind, make in stores.items()}
    baseline = JsonSessionStore(js_dir)
    for n in cfg.sizes:
        _log(f"setup: session of {n:,} messages")
        messages = gen.conversation(n)
        title = gen.title()
        sid = opened["sqlite"].create_session(messages=messages[:BATCH], title=title)
        state = gen.state(0)  # drawn once: the generated data do not depend on the stores
        for store in opened.values():
            if store is not opened["sqlite"]:
                store.create_session(sid, messages[:BATCH], title=title)
            for end in range(BATCH, n, BATCH):
                store.checkpoint(sid, messages[: end + BATCH])
            store.update(sid, state=state)
        baseline.create_session(sid, [], title=title)
        record = baseline.load_session(sid)
        record.update(messages=messages, transcript=list(messages), state=gen.state(0))
        baseline.put_record(record)
        sessions[n] = (sid, messages)
        reps = max(cfg.checkpoints, *cfg.baseline_checkpoints.values()) + 1
        extra_pairs[n] = [gen.call_pair() for _ in range(reps)]
    for store in opened.values():
        store.close()
    del opened, store  # their caches hold every message: a bigger heap slows the GC
    if pg is not None:
        pg.analyze("ckpt")
    states = [gen.state(step) for step in range(1, 64)]

    def run(checkpoint: Callable[[str, list[Any], dict[str, Any]], None], n: int,
            count: int) -> list[float]:
        sid, base = sessions[n]
        messages = list(base)
        samples = []
        for i in range(count + 1):
            messages.extend(extra_pairs[n][i])
            state = states[i % len(states)]
            samples.append(_timed(lambda: checkpoint(sid, messages, state)))  # noqa: B023
        return samples

    ah_samples: dict[str, dict[int, list[float]]] = {}
    for kind, make in stores.items():
        store = make()  # a fresh instance: its first checkpoint reads the context
        ah_samples[kind] = {}
        for n in cfg.sizes:
            _log(f"agent-harness ({kind}): {cfg.checkpoints} checkpoints at {n:,} messages")
            ah_samples[kind][n] = run(
                lambda sid, messages, state, s=store: s.checkpoint(sid, messages, state=state),
                n, cfg.checkpoints,
            )
        store.close()
    js_samples: dict[int, list[float]] = {}
    for n in cfg.sizes:
        count = cfg.baseline_checkpoints[n]
        _log(f"notes baseline: {count} checkpoints at {n:,} messages")
        js_samples[n] = run(baseline.checkpoint, n, count)

    pg_samples = ah_samples.get("postgresql", {})
    rows = [
        Row(
            key=f"checkpoint_{n}",
            operation=f"checkpoint (+2 msgs, state) on {n:,} msgs",
            harness_s=statistics.median(ah_samples["sqlite"][n][1:]),
            baseline_s=statistics.median(js_samples[n][1:]),
            harness_samples=ah_samples["sqlite"][n][1:],
            baseline_samples=js_samples[n][1:],
            extra={"harness_first_s": ah_samples["sqlite"][n][0],
                   "baseline_first_s": js_samples[n][0],
                   **({"pg_first_s": pg_samples[n][0]} if pg_samples else {})},
            pg_s=statistics.median(pg_samples[n][1:]) if pg_samples else None,
            pg_samples=pg_samples[n][1:] if pg_samples else [],
        )
        for n in cfg.sizes
    ]
    leased = bench_leased_checkpoints(cfg, stores, sessions)

    largest = cfg.sizes[-1]
    sid = sessions[largest][0]
    _log(f"resume: load_session + recover of the {largest:,}-message session")
    ah_resume: dict[str, list[float]] = {}
    for kind, make in stores.items():
        ah_resume[kind] = []
        for _ in range(cfg.resumes):
            fresh = make()
            ah_resume[kind].append(
                _timed(lambda: (fresh.load_session(sid), fresh.recover(sid)))  # noqa: B023
            )
            fresh.close()
    js_median, js_resume = _median(
        lambda: (baseline.load_session(sid), baseline.recover(sid)), cfg.baseline_resumes
    )
    pg_resume = ah_resume.get("postgresql")
    resume = Row(
        key=f"resume_{largest}",
        operation=f"load_session + recover, {largest:,} msgs",
        harness_s=statistics.median(ah_resume["sqlite"]),
        baseline_s=js_median,
        harness_samples=ah_resume["sqlite"],
        baseline_samples=js_resume,
        pg_s=statistics.median(pg_resume) if pg_resume else None,
        pg_samples=pg_resume or [],
    )
    return rows, resume, leased


def bench_leased_checkpoints(
    cfg: Config,
    stores: dict[str, Callable[[], Store]],
    sessions: dict[int, tuple[str, list[dict[str, Any]]]],
) -> list[Row]:
    """Checkpoints with the session's lease held around them, as in a harness run.

    Runs after the other checkpoints, on top of what they appended; its tool calls come
    from a generator of their own, so the data of the main figures does not change.
    """
    gen = TextGen(SEED + 2)
    pairs = {n: [gen.call_pair() for _ in range(cfg.checkpoints + 1)] for n in cfg.sizes}
    states = [gen.state(step) for step in range(1, 64)]
    medians: dict[str, dict[int, float]] = {}
    for kind, make in stores.items():
        store = make()
        medians[kind] = {}
        for n in cfg.sizes:
            sid, base = sessions[n]
            messages = store.load_context(sid)
            assert len(messages) == len(base) + 2 * (cfg.checkpoints + 1)
            _log(f"agent-harness ({kind}): {cfg.checkpoints} checkpoints at {n:,} messages, "
                 "inside the lease")
            samples = []
            with store.lease(sid):
                for i in range(cfg.checkpoints + 1):
                    messages.extend(pairs[n][i])
                    state = states[i % len(states)]
                    samples.append(_timed(
                        lambda: store.checkpoint(sid, messages, state=state)  # noqa: B023
                    ))
            medians[kind][n] = statistics.median(samples[1:])
        store.close()
    return [
        Row(f"leased_checkpoint_{n}", f"checkpoint (+2 msgs, state) on {n:,} msgs, leased",
            medians["sqlite"][n], float("nan"), pg_s=medians.get("postgresql", {}).get(n))
        for n in cfg.sizes
    ]


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


def targets(rows: dict[str, Row], cfg: Config) -> list[Target]:
    """Check the stated targets against this run's figures."""
    small, large = cfg.sizes[0], cfg.sizes[-1]
    ratio = rows[f"checkpoint_{large}"].harness_s / rows[f"checkpoint_{small}"].harness_s
    speedup = rows[f"checkpoint_{large}"].speedup
    out = [
        Target(f"checkpoint at {large:,} msgs within 2x of the one at {small:,}",
               f"{ratio:.2f}x", ratio <= 2.0),
        Target(f"checkpoint at {large:,} msgs >= 50x faster than the baseline",
               _times(speedup), speedup >= 50),
    ]
    for key in ("list", "search_rare", "search_common"):
        row = rows[key]
        out.append(Target(f"{row.operation} under 50 ms", _fmt(row.harness_s),
                          row.harness_s < 0.050))
    large_pg, small_pg = rows[f"checkpoint_{large}"].pg_s, rows[f"checkpoint_{small}"].pg_s
    if large_pg is not None and small_pg is not None:
        ratio = large_pg / small_pg
        out.append(Target(f"PostgreSQL: checkpoint at {large:,} msgs within 2x of the one at "
                          f"{small:,}", f"{ratio:.2f}x", ratio <= 2.0))
        for key in ("list", "search_rare", "search_common"):
            row = rows[key]
            assert row.pg_s is not None
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


def render(rows: list[Row], checks: list[Target], cfg: Config, facts: dict[str, Any],
           leased: list[Row] | None = None) -> str:
    """The side-by-side table and the targets, as Markdown."""
    with_pg = any(row.pg_s is not None for row in rows)
    server = f"; PostgreSQL {facts['postgresql']}" if with_pg else ""
    lines = [
        f"Run: {cfg.name}; {facts['cpus']} CPUs; Python {facts['python']}; "
        f"SQLite {facts['sqlite']}{server}; {facts['platform']}",
        "",
    ]
    if with_pg:
        lines += ["| operation | SQLite | PostgreSQL | notes baseline | speed-up (SQLite) |",
                  "|---|---:|---:|---:|---:|"]
    else:
        lines += ["| operation | agent-harness | notes baseline | speed-up |",
                  "|---|---:|---:|---:|"]
    for row in rows:
        pg = f" {_fmt(row.pg_s)} |" if row.pg_s is not None else (" – |" if with_pg else "")
        lines.append(f"| {row.operation} | {_fmt(row.harness_s)} |{pg} {_fmt(row.baseline_s)} "
                     f"| {_times(row.speedup)} |")
    if leased:
        lines += ["", "Inside the run's lease (as the supervisor checkpoints):", ""]
        lines += ["| operation | SQLite | PostgreSQL |", "|---|---:|---:|"] if with_pg else [
            "| operation | agent-harness |", "|---|---:|"]
        for row in leased:
            pg = f" {_fmt(row.pg_s)} |" if row.pg_s is not None else ""
            lines.append(f"| {row.operation} | {_fmt(row.harness_s)} |{pg}")
    lines += ["", "| target | this run | met? |", "|---|---:|---|"]
    for check in checks:
        lines.append(f"| {check.name} | {check.value} | {'yes' if check.met else 'NO'} |")
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
    args = parser.parse_args(argv)
    cfg = QUICK if args.quick else FULL
    gen = TextGen(SEED)
    started = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="store-bench-", dir=args.workdir))
    pg = Postgres(args.postgres) if args.postgres else None
    try:
        checkpoint_rows, resume_row, leased_rows = bench_checkpoints(cfg, work, gen, pg)
        read_rows = bench_list_search(cfg, work, gen, pg)
        facts = machine(pg)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if pg is not None:
            pg.close()
    rows = [*checkpoint_rows, *read_rows, resume_row]
    by_key = {row.key: row for row in rows}
    checks = targets(by_key, cfg)
    table = render(rows, checks, cfg, facts, leased_rows)
    elapsed = time.perf_counter() - started
    print(table)
    print(f"\n(total run time {elapsed:.0f} s)")
    result = {
        "config": asdict(cfg),
        "machine": facts,
        "rows": [
            {**asdict(row), "speedup": row.speedup} for row in rows
        ],
        "leased_rows": [
            {"key": row.key, "operation": row.operation, "harness_s": row.harness_s,
             "pg_s": row.pg_s} for row in leased_rows
        ],
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
