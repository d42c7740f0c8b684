#!/usr/bin/env python
"""Crash torture: SIGKILL ``harness -p`` at random moments of a long tool conversation.

Run from the repository root::

    python benchmarks/torture.py                    # 200 kills, seed 1
    python benchmarks/torture.py --kills 20 --seed 7 --json
    python benchmarks/torture.py --workdir /tmp/torture   # keep the store and the logs

The machinery is :mod:`actors.testing.torture` (the test suite runs it small): a scripted
server plays a model working through an endless tool task, and every request gets tool calls
that leave a trace in a ledger file, or every fifth a plain answer that ends the turn.

The loop starts ``python -m repl -p "continue the task (run I)" --resume ID`` (the first run
without ``--resume``) as a real subprocess, lets it run for a random (seeded) moment, sends it
SIGKILL and reaps it. Moments are drawn so that kills land during start-up and resume
recovery, inside model streams, inside tool runs (some while a command and a background job
it started are running) and between them (checkpoints). A run that ends by itself first is
counted and the loop goes on. After a kill, every process of a command (found by its working
directory in ``/proc``) must be gone within 2 s, ended by the guardian in its process group:
those still alive are counted as survivors (a loss) and killed.

After every kill the store is opened and checked; see :class:`Figures` for what is counted.
After the loop one more resume must run to the end of its turn undisturbed. Exit status 0 when
every loss figure is 0, else 1.

With ``--workdir`` everything is kept for a post-mortem: ``project/`` (with the ledger),
``memory/`` (the session store), ``logs/run-NNNN.err|out`` of every run and
``logs/requests.jsonl`` (every request the endpoint received, with the run that sent it).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from actors.testing.torture import (
    CONTEXT_ROOM,
    DEFAULT_KILLS,
    DEFAULT_SEED,
    Figures,
    run_torture,
)

# ------------------------------------------------------------------------------------ output


def table(figures: Figures) -> str:
    """The figures as a plain-text table."""
    rows: list[tuple[str, str, str]] = [
        ("kill iterations", str(figures.iterations), ""),
        ("kills (SIGKILL while running)", str(figures.kills), "> 0"),
        ("  by phase", ", ".join(f"{k} {v}" for k, v in sorted(figures.kills_by_phase.items())),
         ""),
        ("  while a run_bash command ran", str(figures.kills_during_run_bash), "> 0"),
        ("  command processes alive at those kills", str(figures.processes_at_kill), ""),
        ("survivors (alive 2 s after the kill)", str(figures.survivors), "0"),
        ("successful resumes", str(figures.resumes), "> 0"),
        ("turns finished before the kill", str(figures.turns_finished), ""),
        ("sessions unreadable", str(figures.sessions_unreadable), "0"),
        ("acknowledged checkpoints lost", str(figures.checkpoints_lost), "0"),
        ("transcripts that got shorter", str(figures.transcripts_shrunk), "0"),
        ("tool calls without results sent", str(figures.unpaired_tool_calls_sent), "0"),
        ("tools replayed (ledger duplicates)", str(figures.tools_replayed), "0"),
        ("ran, but answered 'not executed'", str(figures.ran_but_reported_not_executed), "0"),
        ("answered done, but never ran", str(figures.reported_done_but_never_ran), "0"),
        ("failed runs (incl. final run)", str(figures.failed_runs), "0"),
        ("requests served", str(figures.requests_served), ""),
        ("  of them compaction summaries", str(figures.compaction_requests), ""),
        ("compactions saved", str(figures.compactions_saved), ""),
        ("tool calls requested", str(figures.tool_calls_requested), ""),
        ("run_bash calls executed (ledger)", str(figures.tool_calls_executed), ""),
        ("recovered 'outcome unknown'", str(figures.recovered_outcome_unknown), ""),
        ("recovered 'not executed'", str(figures.recovered_not_executed), ""),
        ("leftover processes killed by the loop", str(figures.leftover_processes_killed), ""),
        ("endpoint errors (truncated bodies...)", str(len(figures.server_errors)), ""),
        ("transcript messages at the end", str(figures.transcript_messages), ""),
        ("elapsed", f"{figures.elapsed_s:.1f} s", ""),
    ]
    width = max(len(r[0]) for r in rows)
    lines = [f"{'figure':<{width}}  {'value':>10}  must be", "-" * (width + 22)]
    lines += [f"{name:<{width}}  {value:>10}  {need}" for name, value, need in rows]
    lines.append(f"result: {'OK' if figures.ok else 'LOSS FOUND'} (seed {figures.seed})")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; returns the exit status (0: no loss found)."""
    parser = argparse.ArgumentParser(
        prog="python benchmarks/torture.py", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--kills", type=int, default=DEFAULT_KILLS, metavar="N",
                        help=f"kill iterations (default: {DEFAULT_KILLS})")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, metavar="S",
                        help=f"seed of the kill moments and the model (default: {DEFAULT_SEED})")
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    parser.add_argument("--backend", choices=["asyncio", "trio", "both"], default="both",
                        help="event loop of the harness runs (default: both, chosen per run)")
    parser.add_argument("--context-room", type=int, default=CONTEXT_ROOM, metavar="N",
                        help="context budget for the conversation, in tokens on top of the "
                        f"tool schemas and system prompt (default: {CONTEXT_ROOM}, small so "
                        "that compactions happen)")
    parser.add_argument("--workdir", type=Path, default=None, metavar="DIR",
                        help="keep the project, store and per-run logs here (default: a "
                        "temporary directory, removed)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    args = parser.parse_args(argv)
    backends = ("asyncio", "trio") if args.backend == "both" else (args.backend,)
    if args.workdir is not None and args.workdir.exists() and any(args.workdir.iterdir()):
        parser.error(f"--workdir {args.workdir} is not empty")
    figures = run_torture(args.kills, args.seed, workdir=args.workdir, backends=backends,
                          context_room=args.context_room,
                          log=None if args.quiet else sys.stderr)
    print(table(figures))
    if args.json:
        print(json.dumps(figures.to_json(), sort_keys=True))
    return 0 if figures.ok else 1


if __name__ == "__main__":
    sys.exit(main())
