"""The interactive run's greeting: which session, which model, where its memory is."""

from __future__ import annotations

from collections.abc import Iterable

from actors.core.config import Settings


def greet(settings: Settings, session_id: str, more: Iterable[str] = (), *,
          model: str = "", mode: str = "") -> None:
    """The greeting: the session, the model (``model``: a resumed session's own), the mode
    when it is not the default, the memory directory, ``more`` (a resume's lines), and how
    to get help and leave."""
    print(f"Session:          {session_id}")
    print(f"Model:            {model or settings.model} at {settings.base_url}")
    mode = mode or settings.mode.value
    if mode != "default":
        print(f"Mode:             {mode} (\\mode or Shift-Tab changes it)")
    print(f"Memory directory: {settings.memory_dir}")
    for line in more:
        print(line)
    print("Type \\help for commands, Ctrl-D to exit.", flush=True)
