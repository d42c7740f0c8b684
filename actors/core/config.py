"""Settings of one harness run (from the command line; limits come from the current flags)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

DEFAULT_MEMORY_DIR = "~/.agent-harness/memory"
STORE_ENV = "AGENT_HARNESS_STORE"
DEFAULT_BASE_URL = "http://localhost:11434/v1"
DEFAULT_MODEL = "gemma4"
PLACEHOLDER_API_KEY = "not-needed"
DEFAULT_LLM_TIMEOUT = 120.0
"""--llm-timeout: the longest silence of the endpoint once an answer began."""
DEFAULT_FIRST_TOKEN_TIMEOUT = 600.0
"""--llm-first-token-timeout: the longest wait for an answer to begin (a local model on a CPU
reads a prompt of tens of thousands of tokens for minutes before it writes anything)."""
DEFAULT_MAX_ANSWER_BYTES = 4 * 1024 * 1024
"""--max-answer-bytes: the most text, reasoning and tool-call arguments one answer may bring
(about a million tokens, far above any model's output limit); more is cut as it arrives."""
PROMPT_GRACE_SECONDS = 0.3
"""How long background start-up work (the HTTP client, opening the workspace) waits after
its actor starts, so that it does not hold the interpreter while the first prompt is drawn;
a request that comes sooner does that work at once."""


class Mode(Enum):
    """Permission mode: which tool calls need the user's approval."""

    DEFAULT = "default"  # ask before edits and shell commands
    ACCEPT_EDITS = "acceptEdits"  # edits inside the sandbox are approved; shell still asks
    SKIP_PERMISSIONS = "dangerouslySkipPermissions"  # nothing asks


def default_memory_dir() -> Path:
    return Path(os.environ.get("AGENT_HARNESS_MEMORY_DIR") or DEFAULT_MEMORY_DIR).expanduser()


def default_store_url() -> str | None:
    """The session store named by ``$AGENT_HARNESS_STORE`` (None: SQLite in the memory dir)."""
    return os.environ.get(STORE_ENV) or None


def default_base_url() -> str:
    return os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL


RETRY_BACKOFF_ENV = "AGENT_HARNESS_RETRY_BACKOFF"
DEFAULT_RETRY_BACKOFF = 0.5


def default_retry_backoff() -> float:
    """Seconds before the first retry of a failed model request (doubling after each);
    ``$AGENT_HARNESS_RETRY_BACKOFF`` overrides it (tests use a small one)."""
    try:
        value = float(os.environ.get(RETRY_BACKOFF_ENV) or DEFAULT_RETRY_BACKOFF)
    except ValueError:
        return DEFAULT_RETRY_BACKOFF
    return value if value >= 0 else DEFAULT_RETRY_BACKOFF


@dataclass
class Settings:
    memory_dir: Path = field(default_factory=default_memory_dir)
    store_url: str | None = field(default_factory=default_store_url)  # None: SQLite
    sandbox_dir: Path = field(default_factory=Path.cwd)
    base_url: str = field(default_factory=default_base_url)
    model: str = DEFAULT_MODEL
    api_key: str = field(
        default_factory=lambda: os.environ.get("OPENAI_API_KEY") or PLACEHOLDER_API_KEY
    )
    mode: Mode = Mode.DEFAULT
    llm_timeout: float = DEFAULT_LLM_TIMEOUT
    llm_first_token_timeout: float = DEFAULT_FIRST_TOKEN_TIMEOUT
    llm_total_timeout: float | None = None  # a limit on a whole request (none by default)
    max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES
    tool_timeout: float = 120.0
    max_turns: int = 40
    max_tool_calls: int = 200
    max_cost_usd: float = 5.0
    price_in: float = 0.0  # USD per 1k prompt tokens
    price_out: float = 0.0  # USD per 1k completion tokens
    max_context_tokens: int = 24_000
    compact_threshold: float = 0.8
    max_output_bytes: int = 32 * 1024
    preflight: bool = False  # check the endpoint in the background at start (the REPL does)
    auto_title: bool = False  # ask the model for a title after the first answer (the REPL does)
    retry_backoff: float = field(default_factory=default_retry_backoff)
    chosen: frozenset[str] = frozenset()  # "mode", "model": given on the command line (they
    # then win over what a resumed session saved)
    workspace_snapshots: bool = True  # snapshot the project's files (rewind of files)
    snapshot_retention_days: float = 30.0  # older snapshots are collected (each session's
    # newest is kept)
    snapshot_quota_bytes: int | None = None  # the snapshots' store is kept under it (None:
    # 1 GiB, or 4 times the project's kept size when that is more)
