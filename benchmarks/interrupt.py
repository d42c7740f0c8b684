"""How fast Ctrl-C and Esc return to the prompt: the real REPL in a pseudo-terminal.

Usage: python benchmarks/interrupt.py [--runs N] [--json]

For each run, the scripted server either streams a long answer slowly or asks for a
``run_bash`` that sleeps; the benchmark presses Ctrl-C (SIGINT from the terminal) or Esc (a
key the REPL reads during the turn) once the stream (or the command) is under way, with the
live status line running, and measures the time until ``Interrupted.`` is printed, then until
the prompt is back. The promise is 0.5 s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pexpect

from actors.testing.scripted_server import Reply, ScriptedServer, ToolCall

REPO = Path(__file__).resolve().parent.parent

BOUND = 0.5


def measure(kind: str, key: str, work: Path) -> tuple[float, float]:
    """One interrupted turn; (seconds to 'Interrupted.', seconds to the prompt)."""
    pid_file = work / "pid"
    pid_file.unlink(missing_ok=True)
    if kind == "tool":
        steps = [Reply(tool_calls=[ToolCall(
            "run_bash", {"command": f"echo $$ > {pid_file}; sleep 60"})])]
    else:
        steps = [Reply("tick " * 2000, chunk_delay=0.02)]
    env = {**os.environ, "AGENT_HARNESS_MEMORY_DIR": str(work / "memory"),
           "PYTHONPATH": str(REPO), "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm",
           "OPENAI_API_KEY": "x"}
    with ScriptedServer(steps) as server:
        child = pexpect.spawn(
            sys.executable,
            ["-m", "repl", "--base-url", server.base_url, "--mode", "dangerouslySkipPermissions"],
            env=env, cwd=str(work), encoding="utf-8", timeout=20, dimensions=(40, 160),
        )
        child.delaybeforesend = None  # pexpect sleeps 50 ms before each send by default
        child.expect("You:")
        child.send("go\r")
        if kind == "tool":
            while not pid_file.exists() or not pid_file.read_text().strip():
                time.sleep(0.01)
            time.sleep(0.1)
        else:
            child.expect("tick tick tick")
        start = time.perf_counter()
        if key == "esc":
            child.send("\x1b")
        else:
            child.sendintr()
        child.expect("Interrupted.")
        interrupted = time.perf_counter() - start
        child.expect("You:")
        prompt = time.perf_counter() - start
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
        child.close()
    return interrupted, prompt


def stream_through(term: str, work: Path, words: int) -> float:
    """Seconds from sending a message to the prompt after a long answer streamed with no
    delay (``words`` words in as many chunks), on a terminal of type ``term``."""
    answer = " ".join(f"word{i}" for i in range(words)) + "\n\nThe end."
    env = {**os.environ, "AGENT_HARNESS_MEMORY_DIR": str(work / "memory"),
           "PYTHONPATH": str(REPO), "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": term,
           "OPENAI_API_KEY": "x"}
    with ScriptedServer([Reply(answer)]) as server:
        child = pexpect.spawn(sys.executable, ["-m", "repl", "--base-url", server.base_url],
                              env=env, cwd=str(work), encoding="utf-8", timeout=60,
                              dimensions=(40, 160))
        child.delaybeforesend = None
        child.expect("You:")
        start = time.perf_counter()
        child.send("go\r")
        child.expect("The end.")
        child.expect("You:")
        seconds = time.perf_counter() - start
        # Not Ctrl-D: a dumb terminal's prompt is printed before the terminal leaves cooked
        # mode, and a Ctrl-D typed in between is taken as end-of-file by the terminal itself.
        child.send("\\exit\r")
        child.expect(pexpect.EOF)
        child.close()
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="runs per kind (default 10)")
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    parser.add_argument("--words", type=int, default=3000,
                        help="words of the streamed answer (default 3000)")
    args = parser.parse_args(argv)
    figures: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for key in ("ctrl-c", "esc"):
            for kind in ("tool", "stream"):
                samples = [measure(kind, key, Path(tmp)) for _ in range(args.runs)]
                prompt_times = [p for _, p in samples]
                figures[f"{key} {kind}"] = {
                    "interrupted_median_ms": 1000 * statistics.median(i for i, _ in samples),
                    "prompt_median_ms": 1000 * statistics.median(prompt_times),
                    "prompt_max_ms": 1000 * max(prompt_times),
                }
    print("| key | during | to 'Interrupted.' (median) | to the prompt (median) | (max) |")
    print("|---|---|---:|---:|---:|")
    for name, f in figures.items():
        key, kind = name.split(" ")
        label = "run_bash sleep 60" if kind == "tool" else "a streamed answer"
        print(f"| {'Ctrl-C' if key == 'ctrl-c' else 'Esc'} | {label} "
              f"| {f['interrupted_median_ms']:.0f} ms | {f['prompt_median_ms']:.0f} ms"
              f" | {f['prompt_max_ms']:.0f} ms |")
    met = all(f["prompt_max_ms"] <= BOUND * 1000 for f in figures.values())
    print(f"\nbound {BOUND * 1000:.0f} ms: {'met' if met else 'NOT met'} ({args.runs} runs each)")
    with tempfile.TemporaryDirectory() as tmp:
        through = {term: statistics.median(stream_through(term, Path(tmp), args.words)
                                           for _ in range(max(3, args.runs // 2)))
                   for term in ("xterm", "dumb")}
    print(f"\n| a {args.words}-word answer streamed, send to prompt (median) | time |")
    print("|---|---:|")
    print(f"| xterm: markdown and the live status line | {through['xterm'] * 1000:.0f} ms |")
    print(f"| TERM=dumb baseline: plain text, no status line | {through['dumb'] * 1000:.0f} ms |")
    figures["stream_through_ms"] = {k: v * 1000 for k, v in through.items()}
    if args.json:
        print(json.dumps(figures))
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
