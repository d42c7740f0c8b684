"""The REPL's completer, fed prompt_toolkit Documents directly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document

from repl.interactive.command_names import COMMANDS
from repl.interactive.completion import HarnessCompleter

SESSIONS = [{"id": "abc123", "title": "Parser rewrite", "summary": ""},
            {"id": "abd999", "title": "", "summary": "Fixed the cache key"}]


def complete(completer: HarnessCompleter, text: str) -> list[tuple[str, Any]]:
    document = Document(text, len(text))
    return [(c.text, c.display_meta_text) for c in
            completer.get_completions(document, CompleteEvent(completion_requested=True))]


def test_commands_sessions_and_paths(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "main.py").write_text("")
    (tmp_path / "setup.cfg").write_text("")
    (tmp_path / ".hidden").write_text("")
    completer = HarnessCompleter(lambda: SESSIONS, tmp_path)
    assert [t for t, _ in complete(completer, "\\")] == list(COMMANDS)
    assert complete(completer, "\\fo") == [("\\fork", COMMANDS["\\fork"])]
    assert complete(completer, "/fo") == [("/fork", COMMANDS["\\fork"])]  # the peers' habit
    assert [t for t, _ in complete(completer, "/")] == ["/" + c[1:] for c in COMMANDS]
    assert complete(completer, "\\info ab") == [("abc123", "Parser rewrite"),
                                                 ("abd999", "Fixed the cache key")]
    assert complete(completer, "\\fork abc") == [("abc123", "Parser rewrite")]
    assert complete(completer, "\\title ab") == []  # titles are free text
    assert [t for t, _ in complete(completer, "look at @s")] == ["setup.cfg", "src/"]
    assert [t for t, _ in complete(completer, "look at @src/m")] == ["main.py"]
    assert complete(completer, "look at @../") == []  # never outside the sandbox
    assert complete(completer, "plain words") == []
