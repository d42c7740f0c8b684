"""What the ACP front end costs: its start and a streamed turn, beside print mode's.

Usage: python benchmarks/acp.py [--runs N] [--words N]

Against the scripted server, medians of N runs (real processes, as an editor and a script
start them):

* start: from spawning ``harness --acp`` to its ``initialize`` answer, beside spawning
  ``harness -p`` with ``--output-format stream-json`` to its first line (the session open);
* a turn whose answer streams WORDS words: from the ``session/prompt`` request to its answer
  (every ``session/update`` of the turn received before it), beside print mode's
  ``stream-json`` from its ``session`` line to its ``result`` line (one ``text`` line per
  word). The figures are the turn as the consumer sees it, the model's stream included.
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
from typing import IO, Any

from actors.testing.scripted_server import Reply, ScriptedServer

REPO = Path(__file__).resolve().parent.parent


def _env(memory: Path) -> dict[str, str]:
    return {**os.environ, "AGENT_HARNESS_MEMORY_DIR": str(memory), "OPENAI_API_KEY": "x",
            "PYTHONPATH": str(REPO)}


def _send(stream: IO[bytes], n: int, method: str, **params: Any) -> None:
    stream.write(json.dumps({"jsonrpc": "2.0", "id": n, "method": method,
                             "params": params}).encode() + b"\n")
    stream.flush()


def _answer(stream: IO[bytes], n: int) -> tuple[dict[str, Any], int]:
    """The answer to request ``n`` and how many notifications came before it."""
    updates = 0
    while True:
        message = json.loads(stream.readline())
        if message.get("id") == n and "method" not in message:
            return message, updates
        updates += 1


def acp_run(server: ScriptedServer, project: Path, memory: Path) -> tuple[float, float, int]:
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "repl", "--acp", "--base-url",
                             server.base_url], cwd=project, env=_env(memory),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None
    _send(proc.stdin, 1, "initialize", protocolVersion=1)
    _answer(proc.stdout, 1)
    start = time.perf_counter() - started
    _send(proc.stdin, 2, "session/new", cwd=str(project), mcpServers=[])
    sid = _answer(proc.stdout, 2)[0]["result"]["sessionId"]
    asked = time.perf_counter()
    _send(proc.stdin, 3, "session/prompt", sessionId=sid,
          prompt=[{"type": "text", "text": "talk"}])
    answer, updates = _answer(proc.stdout, 3)
    turn = time.perf_counter() - asked
    assert answer["result"]["stopReason"] == "end_turn", answer
    proc.stdin.close()
    proc.wait(timeout=60)
    return start, turn, updates


def print_run(server: ScriptedServer, project: Path, memory: Path) -> tuple[float, float, int]:
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "repl", "-p", "talk", "--output-format",
                             "stream-json", "--base-url", server.base_url], cwd=project,
                            env=_env(memory), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    first = json.loads(proc.stdout.readline())
    assert first["type"] == "session", first
    opened = time.perf_counter()
    lines = 0
    while json.loads(proc.stdout.readline())["type"] != "result":
        lines += 1
    turn = time.perf_counter() - opened
    proc.wait(timeout=60)
    return opened - started, turn, lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--words", type=int, default=2000)
    args = parser.parse_args()
    text = " ".join(f"w{i}" for i in range(args.words))
    figures: dict[str, list[tuple[float, float, int]]] = {"acp": [], "print": []}
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "project"
        project.mkdir()
        for i in range(args.runs):
            for name, run in (("acp", acp_run), ("print", print_run)):  # interleaved
                with ScriptedServer(lambda body: Reply(text)) as server:
                    figures[name].append(run(server, project, Path(tmp) / f"m{name}{i}"))
    print(f"{args.runs} runs, {args.words} words, medians (load {os.getloadavg()[0]:.1f})")
    print(f"{'':<34}{'harness --acp':>16}{'print mode':>16}")
    for label, index, unit in (("start (to initialize / session)", 0, 1000),
                               ("turn (prompt to answer)", 1, 1000)):
        acp = statistics.median(f[index] for f in figures["acp"]) * unit
        plain = statistics.median(f[index] for f in figures["print"]) * unit
        print(f"{label:<34}{acp:>13.0f} ms{plain:>13.0f} ms")
    acp_updates = figures["acp"][0][2]
    print_lines = figures["print"][0][2]
    print(f"{'messages before the answer':<34}{acp_updates:>16}{print_lines:>16}")


if __name__ == "__main__":
    main()
