"""Completion for the REPL: backslash commands, session ids (with titles), ``@`` file paths."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document

from repl.interactive.command_names import COMMANDS, MODES, TAKES_SESSION_ID

MAX_PATHS = 200


class HarnessCompleter(Completer):
    """Completes ``\\command`` and ``/command``, the session id after ``\\info``/``\\fork``,
    the mode after ``\\mode``, the model after ``\\model``, and ``@path``.

    ``sessions`` returns the listed sessions (a cheap indexed query) when asked; ``sandbox`` is
    the directory whose files complete after ``@``; ``models`` returns the models the
    endpoint lists (asked once, then kept; completion runs in a thread of its own).
    """

    def __init__(self, sessions: Callable[[], Sequence[Mapping[str, Any]]], sandbox: Path,
                 models: Callable[[], list[str]] = list) -> None:
        self._sessions = sessions
        self._sandbox = sandbox
        self.models = models

    def get_completions(
        self, document: Document, complete_event: CompleteEvent
    ) -> Iterable[Completion]:
        text = document.text_before_cursor
        if text.startswith(("\\", "/")) and " " not in text:
            lead = text[0]
            for name, help_text in COMMANDS.items():
                typed = lead + name[1:]
                if typed.startswith(text):
                    yield Completion(typed, -len(text), display_meta=help_text)
            return
        command, _, argument = text.partition(" ")
        if command.startswith("/"):
            command = "\\" + command[1:]
        if command in ("\\mode", "\\model") and " " not in argument:
            names = MODES if command == "\\mode" else self.models()
            for name in names:
                if name.lower().startswith(argument.lower()):
                    yield Completion(name, -len(argument))
            return
        if command in TAKES_SESSION_ID and " " not in argument:
            for item in self._sessions():
                if item["id"].startswith(argument):
                    yield Completion(
                        item["id"], -len(argument),
                        display_meta=item.get("title") or item.get("summary", "")[:60],
                    )
            return
        word = document.get_word_before_cursor(WORD=True)
        if word.startswith("@"):
            yield from self._paths(word[1:])

    def _paths(self, partial: str) -> Iterable[Completion]:
        directory, _, stem = partial.rpartition("/")
        base = (self._sandbox / directory).resolve()
        root = self._sandbox.resolve()
        if base != root and root not in base.parents:
            return
        try:
            entries = sorted(os.scandir(base), key=lambda e: e.name)
        except OSError:
            return
        shown = 0
        for entry in entries:
            if entry.name.startswith(".") and not stem.startswith("."):
                continue
            if entry.name.startswith(stem):
                suffix = "/" if entry.is_dir() else ""
                yield Completion(entry.name + suffix, -len(stem))
                shown += 1
                if shown >= MAX_PATHS:
                    return
