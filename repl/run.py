"""Running the agent: print mode (-p) and the interactive REPL."""

from __future__ import annotations

import argparse

from actors.config import Settings
from actors.errors import UsageError
from actors.store import SessionStore


def run_agent(args: argparse.Namespace, settings: Settings, store: SessionStore) -> int:
    raise UsageError("The agent loop is not available in this build yet; use a session command.")
