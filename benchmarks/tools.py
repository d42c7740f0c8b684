#!/usr/bin/env python
"""What confinement and stoppability cost: each tool against a plain baseline, in one run.

Run from the repository root::

    python benchmarks/tools.py            # default sizes (about half a minute)
    python benchmarks/tools.py --runs 50  # more repetitions per figure
    python benchmarks/tools.py --json

Every figure is the median over ``--runs`` calls of the real tool (``TOOLS[name].run`` under
``anyio.run``), side by side with a baseline doing the same work the way the tools did before
(by name, in place, matching in a thread):

- read_file of a 200 KB file: the tool (walk by fd, bounded pieces, abandonable thread)
  against ``open().readline()`` loops in ``anyio.to_thread.run_sync``;
- grep for a word over the repository's Python files: the tool (a child process that can be
  killed) against ``re.search`` over the same files in a worker thread;
- write_file of 10 KB and edit_file of that file: the tool (temporary file, ``fsync``,
  ``renameat``) against ``Path.write_bytes`` (in place, no ``fsync``);
- run_bash ``true``: the tool (with its guardian, minus-secrets environment, group cleanup)
  against ``anyio.run_process(["bash", "-c", "true"])``;
- stopping: grep with ``(a+)+$`` cancelled after 0.2 s (time from the cancel to the return;
  the baseline never returns, so it is not run), and read_file of a 1 GiB one-line sparse file
  (peak Python memory by ``tracemalloc``; reading that line whole would take 1 GiB).

Scratch files live in a temporary directory, removed at the end.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from actors.core.planning import Planning
from actors.tools import TOOLS, ToolContext

REPO = Path(__file__).resolve().parent.parent


async def median_ms(runs: int, call: Callable[[], Awaitable[Any]]) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        await call()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def _baseline_read(path: Path) -> str:
    out = []
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            out.append(f"{number:6}\t{raw.decode('utf-8', errors='replace')}")
            if sum(map(len, out)) > 30 * 1024:
                break
    return "".join(out)


def _baseline_grep(files: list[Path], pattern: str) -> list[str]:
    regex = re.compile(pattern)
    hits = []
    for path in files:
        with path.open("rb") as handle:
            for number, raw in enumerate(handle, start=1):
                line = raw.decode("utf-8", errors="replace")
                if regex.search(line):
                    hits.append(f"{path}:{number}: {line[:300]}")
    return hits


def _sparse(path: Path, head: bytes, size: int) -> None:
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(size)


async def measure(runs: int, work: Path) -> dict[str, dict[str, float]]:
    sandbox = work / "project"
    sandbox.mkdir()
    ctx = ToolContext(sandbox=sandbox, memory_dir=work / "memory", planning=Planning())
    repo_ctx = ToolContext(sandbox=REPO, memory_dir=work / "memory", planning=Planning())

    def tool(context: ToolContext, name: str, **args: Any) -> Callable[[], Awaitable[str]]:
        return lambda: TOOLS[name].run(context, args)

    big = sandbox / "big.txt"
    big.write_text("".join(f"line {i} of a medium-sized file\n" for i in range(6000)))
    python_files = sorted(p for p in (REPO / "actors").rglob("*.py"))
    figures: dict[str, dict[str, float]] = {}

    figures["read_file 200 KB"] = {
        "tool_ms": await median_ms(runs, tool(ctx, "read_file", path="big.txt")),
        "baseline_ms": await median_ms(
            runs, lambda: anyio.to_thread.run_sync(_baseline_read, big)),
    }
    figures[f"grep a word, {len(python_files)} files"] = {
        "tool_ms": await median_ms(
            runs, tool(repo_ctx, "grep", pattern="cancel", path="actors", glob="*.py")),
        "baseline_ms": await median_ms(
            runs, lambda: anyio.to_thread.run_sync(_baseline_grep, python_files, "cancel")),
    }
    content = "x = 1\n" * 1700  # 10 KB
    plain = sandbox / "plain.py"
    figures["write_file 10 KB"] = {
        "tool_ms": await median_ms(runs, tool(ctx, "write_file", path="w.py", content=content)),
        "baseline_ms": await median_ms(
            runs, lambda: anyio.to_thread.run_sync(plain.write_bytes, content.encode())),
    }
    (sandbox / "e.py").write_text(content + "y = 2\n")
    flip = iter(range(10**9))

    async def edit() -> str:
        n = next(flip)
        old, new = ("y = 2", "y = 3") if n % 2 == 0 else ("y = 3", "y = 2")
        return await TOOLS["edit_file"].run(
            ctx, {"path": "e.py", "old_string": old, "new_string": new})

    def baseline_edit() -> None:
        text = plain.read_text()
        plain.write_text(text.replace("x = 1", "x = 1", 1))

    figures["edit_file 10 KB"] = {
        "tool_ms": await median_ms(runs, edit),
        "baseline_ms": await median_ms(runs, lambda: anyio.to_thread.run_sync(baseline_edit)),
    }
    figures["run_bash true"] = {
        "tool_ms": await median_ms(runs, tool(ctx, "run_bash", command="true")),
        "baseline_ms": await median_ms(
            runs, lambda: anyio.run_process(["bash", "-c", "true"], cwd=sandbox)),
    }

    (sandbox / "evil.txt").write_text("a" * 60 + "b\n")
    stops = []
    for _ in range(max(3, runs // 5)):
        stops.append(0.0)
        start = anyio.current_time()
        with anyio.move_on_after(0.2) as scope:
            await TOOLS["grep"].run(ctx, {"pattern": "(a+)+$", "path": "evil.txt"})
        if scope.cancelled_caught:
            stops[-1] = (anyio.current_time() - start - 0.2) * 1000
    figures["grep (a+)+$: cancel to return"] = {"tool_ms": statistics.median(stops),
                                                "baseline_ms": float("inf")}

    await anyio.to_thread.run_sync(_sparse, sandbox / "huge.txt", b"x" * 100_000, 1024**3)
    tracemalloc.start()
    await TOOLS["read_file"].run(ctx, {"path": "huge.txt"})
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    figures["read_file 1 GiB one line: peak MB"] = {"tool_ms": peak / 1e6,
                                                    "baseline_ms": 1024**3 / 1e6}
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--backend", default="asyncio", choices=["asyncio", "trio"])
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        figures = anyio.run(measure, options.runs, Path(scratch), backend=options.backend)
    if options.json:
        json.dump(figures, sys.stdout, indent=2)
        print()
        return
    print(f"{'':40} {'tool':>10} {'baseline':>10}   (ms; the last row MB)")
    for name, row in figures.items():
        print(f"{name:40} {row['tool_ms']:10.2f} {row['baseline_ms']:10.2f}")


if __name__ == "__main__":
    main()
