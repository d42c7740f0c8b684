"""The ``harness`` command: argument parsing and dispatch.

Without a session command it starts the interactive REPL (or, with ``-p``, runs one turn in
print mode). Errors the user caused print one line on stderr and exit 2; nothing the user can
type produces a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from actors.core.config import (
    DEFAULT_FIRST_TOKEN_TIMEOUT,
    DEFAULT_LLM_TIMEOUT,
    DEFAULT_MAX_ANSWER_BYTES,
    DEFAULT_MODEL,
    Mode,
    Settings,
    default_base_url,
    default_memory_dir,
    default_store_url,
)
from actors.core.errors import HarnessError, UsageError
from repl import startup
from repl.lazy_store import LazyStore
from repl.resume_target import PICK
from repl.secrecy import refuse_secret_arguments

if TYPE_CHECKING:
    from actors.store import Store

# The store's modules and the session commands are imported when a command (or the start
# of a turn) needs them: a new session's first prompt does not (repl/lazy_store.py).

DESCRIPTION = """\
A terminal coding agent with durable sessions. It talks to any OpenAI-compatible endpoint
(ollama by default), runs tools in the project directory, and saves every step.

Start it with no arguments for the interactive prompt, give it a PROMPT to start the
prompt with that message, or -p PROMPT for one answer. The session commands below work
without a model; wherever an ID is taken, any unique prefix of it works."""

EPILOG = """\
examples:
  harness                                 start a new session in this directory
  harness "fix the failing test"          start one with this first message
  harness -c                              continue the latest session of this project
  harness -r                              pick a session to resume (type to search)
  harness -r k3m9                         resume the session whose id starts with k3m9
  harness -p "explain main.py"            one turn, answer on stdout
  harness -p "..." --output-format json   one JSON object: answer, outcome, usage, cost
  harness --acp                           serve an editor over ACP (Zed: see the README)
  harness --list-sessions [--all]         this project's sessions (--all: every project)
  harness --search "cache bug"            sessions containing every word
  harness --fork ID --at 12               a branch holding messages 1 to 12
  harness --export ID --format markdown   readable transcript, messages numbered
  harness --import ~/.claude/projects     Claude Code's sessions (and ~/.codex/sessions,
                                          ~/.gemini/tmp, exported files)
  harness --store postgresql://db/team --list-sessions   the team's shared sessions

exit status: 0 answered (or the command worked); 1 the turn failed, was interrupted or
stopped by a limit, or the store failed; 2 a usage mistake (a bad flag, an unknown, ambiguous,
locked or archived session); 130 interrupted before anything ran."""



class _Formatter(argparse.RawDescriptionHelpFormatter):
    """argparse's width (the terminal's columns less 2, ``$COLUMNS`` first, 80 unknown),
    worked out without ``shutil``: argparse imports it, with its compressors, for every
    argument added, and no command but ``--help`` prints with it."""

    def __init__(self, prog: str, **kwargs: Any) -> None:
        if kwargs.get("width") is None:
            try:
                columns = int(os.environ.get("COLUMNS", ""))
            except ValueError:
                columns = 0
            if columns <= 0 and sys.__stdout__ is not None:
                try:
                    columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
                except (AttributeError, ValueError, OSError):
                    columns = 0
            kwargs["width"] = (columns if columns > 0 else 80) - 2
        super().__init__(prog, **kwargs)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _number(text: str, kind: type[int] | type[float], what: str) -> float:
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if value != value or value in (float("inf"), float("-inf")):  # nan, inf
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
    return value


def _positive_float(text: str) -> float:
    value = _number(text, float, "a positive number")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


_SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def _size(text: str) -> int:
    """Bytes, with a K, M, G or T suffix (binary: 1G is 1 GiB)."""
    cleaned = text.strip().upper().removesuffix("B").removesuffix("I")
    unit = cleaned[-1:] if cleaned[-1:] in _SIZE_UNITS else ""
    value = _number(cleaned[: len(cleaned) - len(unit)], float, "a size such as 2G or 500M")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return int(value * _SIZE_UNITS[unit])


def _positive_int(text: str) -> int:
    value = int(_number(text, int, "a positive whole number"))
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def _price(text: str) -> float:
    value = _number(text, float, "a price in USD")
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {text}")
    return value


def _fraction(text: str) -> float:
    value = _number(text, float, "a fraction such as 0.8")
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {text}")
    return value


class _Version(argparse.Action):
    """``--version``: the installed package's version (looked up only when asked)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> NoReturn:
        from importlib.metadata import PackageNotFoundError, version

        try:
            number = version("agent-harness")
        except PackageNotFoundError:  # run from a checkout that was never installed
            number = "unknown"
        print(f"harness {number}")
        parser.exit(0)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="harness",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=_Formatter,
    )
    parser.add_argument("--version", action=_Version)
    run = parser.add_argument_group("running the agent")
    run.add_argument("initial", nargs="?", metavar="PROMPT",
                     help="start the interactive prompt with this first message")
    run.add_argument("-p", "--prompt", metavar="PROMPT",
                     help="run one user turn, print only the final answer, and exit "
                     "(use '-' to read the prompt from stdin)")
    run.add_argument("--output-format", choices=["text", "json", "stream-json"], default=None,
                     help="with -p: text (the answer, default), json (one object with the "
                     "session id, answer, outcome, usage, cost and tool calls) or stream-json "
                     "(one JSON event per line as they happen); see the README")
    run.add_argument("-r", "--resume", metavar="ID", nargs="?", const=PICK,
                     help="resume a saved session (any unique prefix of its id); without an "
                     "id, pick one (type to search; --all: every project's)")
    run.add_argument("-c", "--continue", dest="continue_", action="store_true",
                     help="resume the most recent session of this project")
    run.add_argument("--sandbox-dir", type=Path, default=None, metavar="DIR",
                     help="project directory the tools are confined to (default: cwd)")
    run.add_argument("--acp", action="store_true",
                     help="serve the Agent Client Protocol on stdin/stdout, for editors (Zed, "
                     "JetBrains, Neovim…); see the README")
    run.add_argument("--mode", choices=[m.value for m in Mode], default=None,
                     help="default: ask before edits and shell commands; acceptEdits: approve "
                     "edits inside the sandbox; dangerouslySkipPermissions: never ask "
                     "(default: default, or what a resumed session last used; \\mode and "
                     "Shift-Tab change it in the REPL)")
    model = parser.add_argument_group("model endpoint")
    model.add_argument("--base-url", default=None,
                       help="OpenAI-compatible endpoint (default: $OPENAI_BASE_URL or "
                       "http://localhost:11434/v1); the key comes from $OPENAI_API_KEY")
    model.add_argument("--model", default=None,
                       help="model name (default: gemma4, or what a resumed session last "
                       "used; \\model changes it in the REPL)")
    model.add_argument("--llm-timeout", type=_positive_float, default=DEFAULT_LLM_TIMEOUT,
                       metavar="S", help="the longest silence of the endpoint once an answer "
                       "began, in seconds: a slow, steady answer is never cut (default: 120)")
    model.add_argument("--llm-first-token-timeout", type=_positive_float,
                       default=DEFAULT_FIRST_TOKEN_TIMEOUT, metavar="S",
                       help="seconds an answer may take to begin (a local model reads a long "
                       "prompt first; default: 600, never below --llm-timeout)")
    model.add_argument("--llm-total-timeout", type=_positive_float, default=None, metavar="S",
                       help="a limit on one whole model request, retries included (default: "
                       "none)")
    limits = parser.add_argument_group("limits")
    limits.add_argument("--tool-timeout", type=_positive_float, default=120.0, metavar="S",
                        help="seconds for one tool call (default: 120)")
    limits.add_argument("--max-turns", type=_positive_int, default=40, metavar="N",
                        help="model requests per user message (default: 40)")
    limits.add_argument("--max-tool-calls", type=_positive_int, default=200, metavar="N",
                        help="tool calls per session (default: 200)")
    limits.add_argument("--max-cost-usd", type=_positive_float, default=5.0, metavar="USD",
                        help="spend per session (default: 5.0)")
    limits.add_argument("--price-in", type=_price, default=0.0, metavar="USD",
                        help="price per 1k prompt tokens (default: 0)")
    limits.add_argument("--price-out", type=_price, default=0.0, metavar="USD",
                        help="price per 1k completion tokens (default: 0)")
    limits.add_argument("--max-answer-bytes", type=_positive_int,
                        default=DEFAULT_MAX_ANSWER_BYTES, metavar="N",
                        help="the most text, reasoning and tool-call arguments one answer may "
                        "bring; more is cut as it arrives (default: 4194304, 4 MiB)")
    limits.add_argument("--max-context-tokens", type=_positive_int, default=24_000,
                        metavar="N", help="context budget in tokens (default: 24000)")
    limits.add_argument("--compact-threshold", type=_fraction, default=0.8, metavar="F",
                        help="compact in the background past this fraction of the budget "
                        "(default: 0.8)")
    storage = parser.add_argument_group("storage")
    storage.add_argument("--memory-dir", type=Path, default=None, metavar="DIR",
                         help="memory notes and saved sessions (default: "
                         "$AGENT_HARNESS_MEMORY_DIR or ~/.agent-harness/memory)")
    storage.add_argument("--store", metavar="URL", default=None,
                         help="keep sessions in the PostgreSQL database postgresql://… to share "
                         "them between machines (default: $AGENT_HARNESS_STORE, else SQLite in "
                         "the memory directory; 'sqlite' forces SQLite); its password goes in "
                         "$AGENT_HARNESS_STORE's URL or ~/.pgpass, never on the command line")
    sessions = parser.add_argument_group("session commands (no model needed)")
    commands = sessions.add_mutually_exclusive_group()
    commands.add_argument("--list-sessions", action="store_true",
                          help="this project's sessions, most recent first: id, when, "
                          "messages, status, title and preview")
    commands.add_argument("--search", metavar="QUERY",
                          help="sessions containing every word of QUERY")
    commands.add_argument("--info", metavar="ID", help="show a session's details and usage")
    commands.add_argument("--rename", nargs=2, metavar=("ID", "TITLE"), help="set a title")
    commands.add_argument("--fork", metavar="ID",
                          help="copy a session (with --at N: up to message N); says what it "
                          "made (--json: the new id, parent and fork point)")
    commands.add_argument("--archive", metavar="ID", help="hide a session from listings")
    commands.add_argument("--unarchive", metavar="ID", help="bring an archived session back")
    commands.add_argument("--delete", metavar="ID", help="delete a session (needs --yes)")
    commands.add_argument("--export", metavar="ID",
                          help="print a session as JSON, markdown or ATIF")
    commands.add_argument("--import", dest="import_paths", nargs="+", metavar="PATH",
                          help="import sessions: exported records, Claude Code, Codex CLI and "
                               "Gemini CLI sessions (files, or directories walked; recognised "
                               "by content)")
    commands.add_argument("--rewind", metavar="ID",
                          help="bring a session's project files back to what they were at "
                          "user message --to N (with --files), or --undo the last rewind")
    commands.add_argument("--compact", dest="compact_id", metavar="ID",
                          help="compact a session now (needs the model: one summary call)")
    commands.add_argument("--trust-project", action="store_true",
                          help="approve this project's .agent-harness/settings.json as it is "
                          "now: its hooks run from then on, until it changes (print mode and "
                          "--acp never run an unapproved one; the interactive prompt asks)")
    commands.add_argument("--doctor", action="store_true",
                          help="check the session store (integrity, search index, every "
                          "session, lock files, older records) and the model endpoint "
                          "(reachable, the model, tool calls, its context)")
    sessions.add_argument("--all", dest="all_projects", action="store_true",
                          help="with --list-sessions/--search/--resume: every project's "
                          "sessions, with a project column")
    sessions.add_argument("--at", type=_positive_int, metavar="N",
                          help="with --fork: keep messages 1 to N (as --info and --export "
                          "number them, or a search hit's #N)")
    sessions.add_argument("--include-archived", action="store_true",
                          help="with --list-sessions/--search: include archived sessions")
    sessions.add_argument("--json", action="store_true",
                          help="with --list-sessions/--search/--info/--fork: print JSON "
                          "(every field)")
    sessions.add_argument("--yes", action="store_true", help="confirm --delete")
    sessions.add_argument("--repair", action="store_true",
                          help="with --doctor: rebuild the search index and copy damaged "
                          "sessions into new ones (originals are never edited)")
    sessions.add_argument("--format", choices=["json", "markdown", "atif"], default=None,
                          help="with --export (default: json)")
    rewind = parser.add_argument_group("rewind (with --rewind ID)")
    rewind.add_argument("--to", type=_positive_int, metavar="N",
                        help="the user message to go back to (numbered as --info shows)")
    what = rewind.add_mutually_exclusive_group()
    what.add_argument("--files", dest="rewind_what", action="store_const", const="files",
                      help="the project's files only; with --info ID, --export ID: the "
                      "files each tool call changed; with --search PATH: the sessions whose "
                      "tool calls changed PATH")
    what.add_argument("--conversation", dest="rewind_what", action="store_const",
                      const="conversation", help="the conversation only")
    what.add_argument("--both", dest="rewind_what", action="store_const", const="both",
                      help="the files and the conversation")
    rewind.add_argument("--undo", action="store_true",
                        help="undo the session's last rewind of files (one cut short: put "
                        "back what it wrote)")
    rewind.add_argument("--finish", dest="finish_rewind", action="store_true",
                        help="finish a rewind of the files that was cut short (what changed "
                        "since is left as it is)")
    rewind.add_argument("--dry-run", action="store_true",
                        help="show what would change (a diffstat) and change nothing")
    rewind.add_argument("--diff", action="store_true",
                        help="with --info ID --files: each call's diff too")
    run.add_argument("--no-snapshots", action="store_true",
                     help="keep no workspace snapshots this run (the files cannot be rewound)")
    storage.add_argument("--snapshot-days", type=_positive_float, default=30.0, metavar="D",
                         help="keep workspace snapshots this many days (each session's newest "
                         "is always kept; default: 30)")
    storage.add_argument("--snapshot-quota", type=_size, default=None, metavar="SIZE",
                         help="keep the workspace snapshots under SIZE (e.g. 2G, 500M; "
                         "default: 1G, or 4 times the project when that is more): the oldest "
                         "snapshots of other sessions go first")
    return parser


def settings_from(args: argparse.Namespace) -> Settings:
    return Settings(
        memory_dir=(args.memory_dir or default_memory_dir()).expanduser(),
        store_url=args.store if args.store is not None else default_store_url(),
        sandbox_dir=(args.sandbox_dir or Path.cwd()).expanduser().resolve(),
        base_url=args.base_url if args.base_url is not None else default_base_url(),
        model=args.model or DEFAULT_MODEL,
        mode=Mode(args.mode or Mode.DEFAULT.value),
        chosen=frozenset(name for name in ("mode", "model") if getattr(args, name)),
        llm_timeout=args.llm_timeout,
        llm_first_token_timeout=args.llm_first_token_timeout,
        llm_total_timeout=args.llm_total_timeout,
        tool_timeout=args.tool_timeout,
        max_turns=args.max_turns,
        max_tool_calls=args.max_tool_calls,
        max_cost_usd=args.max_cost_usd,
        price_in=args.price_in,
        price_out=args.price_out,
        max_context_tokens=args.max_context_tokens,
        max_answer_bytes=args.max_answer_bytes,
        compact_threshold=args.compact_threshold,
        workspace_snapshots=not args.no_snapshots,
        snapshot_retention_days=args.snapshot_days,
        snapshot_quota_bytes=args.snapshot_quota,
    )


def open_store(settings: Settings) -> Store:
    from actors.store import open_store as open_backend

    store = open_backend(settings.memory_dir, settings.store_url)
    said = [f"harness: {warning}" for warning in store.import_warnings]
    if store.read_only:
        said.append(f"harness: the session store is read-only ({store.location}): sessions "
                    "can be listed, searched, shown and exported, not changed.")
    if said:
        from repl.interactive.sanitize import safe_for

        for line in said:
            print(safe_for(sys.stderr, line), file=sys.stderr)
    return store


def project_scope(args: argparse.Namespace, settings: Settings) -> str | None:
    """The project a listing shows (None with ``--all``: every project)."""
    return None if args.all_projects else str(settings.sandbox_dir)


def run_session_command(
    args: argparse.Namespace, store: Store, settings: Settings
) -> int | None:
    """Run the session command in ``args``; None when there is none."""
    if not any(getattr(args, c) not in (None, False) for c in _SESSION_COMMANDS):
        return None
    from repl import session_commands

    if args.list_sessions:
        return session_commands.list_sessions(
            store, include_archived=args.include_archived, as_json=args.json,
            project_root=project_scope(args, settings),
        )
    if args.search is not None and args.rewind_what == "files":
        from repl.files_report import search_path

        return search_path(store, args.search, memory_dir=_memory_dir(args), as_json=args.json)
    if args.search is not None:
        return session_commands.search_sessions(
            store, args.search, include_archived=args.include_archived, as_json=args.json,
            project_root=project_scope(args, settings),
        )
    if args.info and args.rewind_what == "files":
        from repl.files_report import show_files

        return show_files(store, args.info, memory_dir=_memory_dir(args),
                          with_diff=args.diff, as_json=args.json)
    if args.info:
        return session_commands.show_info(store, args.info, as_json=args.json)
    if args.rename:
        return session_commands.rename(store, *args.rename)
    if args.fork:
        return session_commands.fork(store, args.fork, args.at, as_json=args.json)
    if args.archive:
        return session_commands.set_archived(store, args.archive, True)
    if args.unarchive:
        return session_commands.set_archived(store, args.unarchive, False)
    if args.delete:
        return session_commands.delete(store, args.delete, yes=args.yes)
    if args.export and args.rewind_what == "files":
        from repl.files_report import export_with_files

        return export_with_files(store, args.export, memory_dir=_memory_dir(args),
                                 fmt=args.format or "json")
    if args.export:
        return session_commands.export(store, args.export, fmt=args.format or "json")
    if args.import_paths:
        return session_commands.import_(store, args.import_paths)
    if args.rewind:
        return _rewind(args, store)
    return None


_ID_ARGUMENTS = ("info", "fork", "archive", "unarchive", "delete", "export", "compact_id",
                 "rewind")


def resolve_ids(args: argparse.Namespace, store: Store) -> None:
    """Every session id in ``args`` made whole: any unique prefix names a session (an
    unknown or ambiguous one is a usage error, before anything else happens)."""
    for name in _ID_ARGUMENTS:
        value = getattr(args, name)
        if value:
            setattr(args, name, store.resolve_id(value))
    if args.rename:
        args.rename = [store.resolve_id(args.rename[0]), args.rename[1]]
    if args.resume and args.resume != PICK:
        args.resume = store.resolve_id(args.resume)


_SESSION_COMMANDS = ("list_sessions", "search", "info", "rename", "fork", "archive",
                     "unarchive", "delete", "export", "import_paths", "compact_id", "doctor",
                     "rewind")


def _store_after_the_prompt(args: argparse.Namespace, settings: Settings) -> bool:
    """Whether the store is opened after the first prompt is drawn: for a new session at
    the interactive prompt (a terminal, no session to resume, no first message, no
    command), on SQLite (a PostgreSQL server, or a URL that names no store, is asked
    first: its failure is a usage mistake or a server's), in a memory directory that exists
    (a first start makes it, private, with the store; the history file goes in it)."""
    return (args.prompt is None and args.initial is None and args.resume is None
            and not args.continue_ and not args.acp
            and not any(getattr(args, c) not in (None, False) for c in _SESSION_COMMANDS)
            and _on_sqlite(settings.store_url)
            and sys.stdin.isatty() and settings.memory_dir.is_dir())


def _on_sqlite(url: str | None) -> bool:
    """Whether the store setting names SQLite, by the store's rule
    (:func:`actors.store.is_sqlite_url`). No setting (None: the default, SQLite in the
    memory directory, as :class:`Settings` has it) is answered without importing the store;
    a setting given (``--store``, ``$AGENT_HARNESS_STORE``) imports the store's modules to
    read it, which its open (before the prompt or after) needs next anyway."""
    if url is None:
        return True
    from actors.store import is_sqlite_url

    return is_sqlite_url(url)


def _memory_dir(args: argparse.Namespace) -> Path:
    return settings_from(args).memory_dir


def _rewind(args: argparse.Namespace, store: Store) -> int:
    from repl.rewind import rewind

    if args.finish_rewind and (args.undo or args.to is not None):
        raise UsageError("--finish finishes a rewind that was cut short; it goes with "
                         "--rewind ID alone.")
    if not args.finish_rewind and args.undo == (args.to is not None):
        raise UsageError("--rewind ID needs --to N (the user message to go back to), --undo "
                         "or --finish.")
    if args.undo and args.rewind_what not in (None, "files"):
        raise UsageError("--undo undoes the last rewind of files; a conversation rewind "
                         "keeps what came after in a fork (--resume it).")
    if not (args.undo or args.finish_rewind) and args.rewind_what is None:
        raise UsageError("Say what to rewind: --files, --conversation or --both.")
    settings = settings_from(args)
    return rewind(store, args.rewind, what=args.rewind_what or "files",
                  memory_dir=settings.memory_dir, project=settings.sandbox_dir, to=args.to,
                  undo=args.undo, dry_run=args.dry_run, as_json=args.json,
                  finish_pending=args.finish_rewind)


def _check_combinations(args: argparse.Namespace) -> None:
    refuse_secret_arguments(args.store, args.base_url)
    command = next((c for c in _SESSION_COMMANDS if getattr(args, c) not in (None, False)), None)
    if args.trust_project and (command or args.initial is not None or args.prompt is not None
                               or args.resume is not None or args.continue_ or args.acp):
        raise UsageError("--trust-project works on its own (then start the harness as usual).")
    if args.resume is not None and not args.resume.strip():
        raise UsageError("--resume needs a session id (see --list-sessions), or nothing to "
                         "pick one; to start a new session, leave --resume out.")
    if args.resume and args.continue_:
        raise UsageError("Use either --resume or --continue, not both.")
    if args.compact_id and (args.resume or args.continue_ or args.prompt is not None):
        raise UsageError("--compact ID works on its own; it cannot be combined with a turn.")
    if args.yes and not args.delete:
        raise UsageError("--yes only confirms --delete.")
    if args.repair and not args.doctor:
        raise UsageError("--repair goes with --doctor.")
    if args.json and command not in ("list_sessions", "search", "info", "fork", "rewind"):
        raise UsageError("--json goes with --list-sessions, --search, --info, --fork or "
                         "--rewind (for -p, use --output-format json).")
    if args.format is not None and command != "export":
        raise UsageError("--format goes with --export.")
    if args.format == "atif" and args.rewind_what == "files":
        raise UsageError("--export --files writes JSON or markdown (ATIF has no place for "
                         "the files a tool call changed).")
    if args.include_archived and command not in ("list_sessions", "search"):
        raise UsageError("--include-archived goes with --list-sessions or --search.")
    if args.all_projects and command not in ("list_sessions", "search") \
            and args.resume != PICK:
        raise UsageError("--all goes with --list-sessions, --search or --resume without an "
                         "id.")
    if args.at is not None and command != "fork":
        raise UsageError("--at N goes with --fork ID.")
    files_view = args.rewind_what == "files" and (args.info or args.export
                                                  or args.search is not None)
    rewind_flags = [flag for flag, on in (
        ("--to", args.to is not None),
        ("--files/--conversation/--both", args.rewind_what and not files_view),
        ("--undo", args.undo), ("--finish", args.finish_rewind),
        ("--dry-run", args.dry_run)) if on]
    if rewind_flags and not args.rewind:
        verb = "goes" if len(rewind_flags) == 1 else "go"
        raise UsageError(f"{' and '.join(rewind_flags)} {verb} with --rewind ID.")
    if args.diff and not (args.info and args.rewind_what == "files"):
        raise UsageError("--diff goes with --info ID --files.")
    if args.initial is not None:
        if command is not None:
            raise UsageError(f"A prompt cannot be combined with {_flag(command)}.")
        if args.prompt is not None:
            raise UsageError("Give the prompt once: either -p PROMPT or PROMPT.")
        if not args.initial.strip():
            raise UsageError("The prompt is empty.")
    if args.acp:
        others = [flag for flag, on in (
            ("a prompt", args.initial is not None or args.prompt is not None),
            ("--resume", args.resume is not None), ("--continue", args.continue_),
            ("--output-format", args.output_format is not None),
            (_flag(command) if command else "", command is not None)) if on]
        if others:
            raise UsageError(f"--acp serves an editor, which picks the sessions; it cannot be "
                             f"combined with {', '.join(others)}.")
    if args.output_format is not None and command is not None:
        raise UsageError("--output-format goes with -p, not with session commands.")
    if args.output_format is not None and args.initial is not None:
        raise UsageError("--output-format goes with -p (PROMPT alone starts the "
                         "interactive prompt).")


def _flag(dest: str) -> str:
    return {"import_paths": "--import", "compact_id": "--compact"}.get(
        dest, "--" + dest.replace("_", "-"))


def main(argv: Sequence[str] | None = None) -> int:
    startup.pause()  # until the start is over (repl/startup.py)
    try:
        return _main(argv)
    finally:
        startup.resume()


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    try:
        _check_combinations(args)
        settings = settings_from(args)
        if args.trust_project:
            from repl.interactive.sanitize import through_the_boundary
            from repl.project_config import trust_project

            startup.resume()
            with through_the_boundary():
                return trust_project(settings)
        if args.doctor:
            from repl import session_commands
            from repl.files_report import doctor_snapshots
            from repl.interactive.sanitize import through_the_boundary

            startup.resume()
            with through_the_boundary():
                checked = session_commands.doctor(settings.memory_dir, repair=args.repair,
                                                  store_url=settings.store_url)
                worst = max(checked, doctor_snapshots(settings, repair=args.repair))
                if not args.repair:  # the settings files and AGENTS.md, as a session reads them
                    from repl.project_config import report_lines

                    print("\n".join(report_lines(settings)), flush=True)
                if not args.repair:  # a repair is the store's; the endpoint is only looked at
                    from repl.doctor_endpoint import doctor_endpoint

                    doctor_endpoint(settings)
            return worst
        lazy_store = LazyStore(partial(open_store, settings))
        try:
            if not _store_after_the_prompt(args, settings):
                store = lazy_store.writable()  # before anything runs: its failure is said first
                resolve_ids(args, store)
                if any(getattr(args, c) not in (None, False) for c in _SESSION_COMMANDS):
                    startup.resume()  # the command's own work is not the start's
                    from repl.interactive.sanitize import through_the_boundary

                    with through_the_boundary():
                        status = run_session_command(args, store, settings)
                    if status is not None:
                        return status
            from repl.run import run_agent

            return run_agent(args, settings, lazy_store)
        finally:
            lazy_store.close()
    except HarnessError as exc:
        if args.output_format in ("json", "stream-json"):  # a script still gets its object
            from repl.headless import failure

            failure(sys.stdout, str(exc), exc.exit_code, args.model or DEFAULT_MODEL)
        from repl.interactive.sanitize import safe_for

        print(safe_for(sys.stderr, f"harness: {exc}"), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # e.g. `harness --export ID | head`
        return 0
