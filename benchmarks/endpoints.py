"""How fast a dead or broken endpoint is reported, and what a retried failure costs.

Usage: python benchmarks/endpoints.py [--runs N] [--json]

In process (the model client actor, the default retry policy and real sleeps): the time from
sending a request to its outcome for a refused connection, an unknown host, a URL without a
scheme, a persistent HTTP 500, and llama.cpp without ``--jinja``. As a user meets it (the real
``harness -p`` process, Python's start included): a refused connection, from starting the
process to its exit. Side by side: what the same failure cost before bounded retries (the
whole ``--llm-timeout``, 120 s by default). The promise is about 2 s for an unreachable
endpoint.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from actors.core.events import EventSink
from actors.core.mailbox import ask
from actors.model import ModelClient, ModelOutcome, ModelRequest
from actors.testing.flavours import LlamaCpp
from actors.testing.scripted_server import Fail, ScriptedServer

REPO = Path(__file__).resolve().parent.parent
BEFORE = 120.0  # the default --llm-timeout: what every one of these cost before
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


def print_mode() -> tuple[float, str]:
    url = f"http://127.0.0.1:{free_port()}/v1"
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "AGENT_HARNESS_MEMORY_DIR": str(Path(tmp) / "memory"),
               "PYTHONPATH": str(REPO), "OPENAI_API_KEY": "x"}
        env.pop("AGENT_HARNESS_RETRY_BACKOFF", None)
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "repl", "-p", "hi", "--base-url", url],
                              cwd=tmp, env=env, capture_output=True, text=True, timeout=60)
        elapsed = time.perf_counter() - started
    return elapsed, done.stderr.strip().splitlines()[-1]


CASES = ["connection refused", "unknown host", "URL without a scheme", "HTTP 500 five times",
         "llama.cpp without --jinja"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
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
    times = []
    for _ in range(args.runs):
        elapsed, line = print_mode()
        times.append(elapsed)
    rows.append({"case": "connection refused (harness -p, start to exit)",
                 "median_s": statistics.median(times), "max_s": max(times), "line": line})
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'failure':<50} {'median':>8} {'max':>8} {'before':>8}")
    for row in rows:
        print(f"{row['case']:<50} {row['median_s']:>7.2f}s {row['max_s']:>7.2f}s "
              f"{BEFORE:>7.0f}s")
    print()
    for row in rows:
        print(f"{row['case']}: {row['line']}")


if __name__ == "__main__":
    main()
