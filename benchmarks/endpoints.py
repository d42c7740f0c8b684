"""How fast a dead or broken endpoint is reported, and what a retried failure costs.

Usage: python benchmarks/endpoints.py [--runs N] [--json] [--burners N] [--baseline REV]

In process (the model client actor, the default retry policy and real sleeps): the time from
sending a request to its outcome for a refused connection, an unknown host, a URL without a
scheme, a persistent HTTP 500, and llama.cpp without ``--jinja``. As a user meets it (the real
``harness -p`` process, Python's start included): a refused connection, from starting the
process to its exit. Side by side: what the same failure cost before bounded retries (the
whole ``--llm-timeout``, 120 s by default). The promise is about 2 s for an unreachable
endpoint.

The ``harness -p`` figure is taken at rest and with the machine loaded: ``--burners`` busy
processes (default one per core) spinning on the CPU while it runs; the load average before
the run is printed (other work on a shared machine adds to both). With ``--baseline REV``
the same runs of that revision (``git archive`` of it into a temporary directory)
interleave with this checkout's, side by side.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio

from actors.core.events import EventSink
from actors.core.mailbox import ask
from actors.model import ModelClient, ModelOutcome, ModelRequest
from actors.testing.flavours import LlamaCpp
from actors.testing.scripted_server import Fail, ScriptedServer

REPO = Path(__file__).resolve().parent.parent
BEFORE = 120.0  # the old --llm-timeout on the whole request: what each of these once cost
TOOLS = [{"type": "function", "function": {"name": "ls", "parameters": {"type": "object"}}}]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def one_request(base_url: str, tools: Any = None) -> tuple[float, ModelOutcome]:
    client = ModelClient(base_url=base_url, api_key="x", model="gemma4", timeout=BEFORE)
    inbox, receive = anyio.create_memory_object_stream[ModelRequest](1)
    async with anyio.create_task_group() as tg:
        await tg.start(client.run, receive)
        started = time.perf_counter()
        outcome = await ask(inbox, lambda reply: ModelRequest(
            [{"role": "user", "content": "hi"}], reply, tools=tools,
            events=EventSink(None)), "model client")
        elapsed = time.perf_counter() - started
        inbox.close()
    return elapsed, outcome


def in_process(case: str) -> tuple[float, str]:
    if case == "connection refused":
        return anyio.run(one_request, f"http://127.0.0.1:{free_port()}/v1")  # type: ignore[return-value]
    if case == "unknown host":
        return anyio.run(one_request, "http://no-such-host.invalid:11434/v1")  # type: ignore[return-value]
    if case == "URL without a scheme":
        return anyio.run(one_request, "localhost:11434/v1")  # type: ignore[return-value]
    if case == "HTTP 500 five times":
        with ScriptedServer([Fail(500, "boom")] * 5) as server:
            return anyio.run(one_request, server.base_url)  # type: ignore[return-value]
    with ScriptedServer([], flavour=LlamaCpp(jinja=False)) as server:
        return anyio.run(one_request, server.base_url, TOOLS)  # type: ignore[return-value]


def print_mode(repo: Path = REPO) -> tuple[float, str]:
    url = f"http://127.0.0.1:{free_port()}/v1"
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "AGENT_HARNESS_MEMORY_DIR": str(Path(tmp) / "memory"),
               "PYTHONPATH": str(repo), "OPENAI_API_KEY": "x"}
        env.pop("AGENT_HARNESS_RETRY_BACKOFF", None)
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "repl", "-p", "hi", "--base-url", url],
                              cwd=tmp, env=env, capture_output=True, text=True, timeout=60)
        elapsed = time.perf_counter() - started
    return elapsed, done.stderr.strip().splitlines()[-1]


def _burn() -> None:
    while True:
        pass


@contextlib.contextmanager
def burning(count: int) -> Iterator[None]:
    """``count`` processes spinning on the CPU for the block."""
    burners = [multiprocessing.Process(target=_burn, daemon=True) for _ in range(count)]
    for burner in burners:
        burner.start()
    try:
        time.sleep(0.5)  # the scheduler spreads them
        yield
    finally:
        for burner in burners:
            burner.kill()
            burner.join()


@contextlib.contextmanager
def checkout(rev: str | None) -> Iterator[Path | None]:
    """The files of revision ``rev`` in a temporary directory (None: no baseline)."""
    if rev is None:
        yield None
        return
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", rev], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        yield Path(tmp)


def unreachable_rows(runs: int, burners: int, baseline: Path | None, rev: str | None
                     ) -> list[dict[str, Any]]:
    """``harness -p`` against nothing, at rest and loaded, this checkout and the baseline's
    runs interleaved."""
    rows = []
    for load in ("at rest", f"{burners} CPU burners"):
        times: dict[str, list[float]] = {"this checkout": [], f"baseline {rev}": []}
        line = ""
        with burning(burners if load != "at rest" else 0):
            for _ in range(runs):
                elapsed, line = print_mode()
                times["this checkout"].append(elapsed)
                if baseline is not None:
                    times[f"baseline {rev}"].append(print_mode(baseline)[0])
        for who, measured in times.items():
            if measured:
                rows.append({"case": f"connection refused (harness -p, start to exit), "
                             f"{load}, {who}", "median_s": statistics.median(measured),
                             "max_s": max(measured), "line": line})
    return rows


CASES = ["connection refused", "unknown host", "URL without a scheme", "HTTP 500 five times",
         "llama.cpp without --jinja"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--burners", type=int, default=os.cpu_count() or 1,
                        help="busy processes for the loaded runs (default: one per core)")
    parser.add_argument("--baseline", metavar="REV", default=None,
                        help="a revision whose harness -p runs beside this one (e.g. main)")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    for case in CASES:
        times, line = [], ""
        for _ in range(args.runs):
            elapsed, outcome = in_process(case)
            times.append(elapsed)
            line = str(outcome.error)
        rows.append({"case": f"{case} (in process)", "median_s": statistics.median(times),
                     "max_s": max(times), "line": line})
    with checkout(args.baseline) as baseline:
        rows += unreachable_rows(args.runs, args.burners, baseline, args.baseline)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    load = os.getloadavg()[0]
    print(f"load average {load:.1f} before the run; {os.cpu_count()} cores")
    width = max(len(row["case"]) for row in rows)
    print(f"{'failure':<{width}} {'median':>8} {'max':>8}")
    for row in rows:
        print(f"{row['case']:<{width}} {row['median_s']:>7.2f}s {row['max_s']:>7.2f}s")
    print()
    for row in rows:
        print(f"{row['case']}: {row['line']}")


if __name__ == "__main__":
    main()
