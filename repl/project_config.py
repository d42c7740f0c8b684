"""The project's configuration at the front end: approved once, and reported.

- :func:`ask_about_project`: the interactive prompt, before the session opens, shows a project
  settings file that would run commands and is not approved (its hooks, command by command)
  and asks once for this content (``y`` approves it: :mod:`actors.core.project_trust`;
  anything else runs the session without it, and the next start asks again).
- :func:`trust_project`: ``harness --trust-project`` approves the file as it is, after
  printing what it runs (for print mode, ``--acp`` and scripts, which never ask: they go on
  without an unapproved file and say so in one line).
- :func:`report_lines`: the settings files, the hooks in force and the project's
  ``AGENTS.md`` files, for ``--doctor`` and ``\\info``.

Everything here blocks on small files (the settings files, the approvals, ``AGENTS.md``).
Text from the files is shown through the output boundary (:mod:`repl.interactive.sanitize`).
"""

from __future__ import annotations

import sys
from typing import TextIO

from actors.core.config import Settings
from actors.core.errors import UsageError
from actors.core.project_trust import approve
from actors.core.settings_files import SettingsFile, read_settings


def _project_file(settings: Settings) -> SettingsFile | None:
    files = read_settings(settings.memory_dir, settings.sandbox_dir)
    return next((f for f in files if f.scope == "project"), None)


def _commands(file: SettingsFile) -> list[str]:
    """What ``file`` would run, one line per command (whatever its approval)."""
    from actors.hooks import hook_table

    unapproved = SettingsFile(file.scope, file.path, file.loaded, approved=True)
    table, problems = hook_table([unapproved])
    lines = []
    for event, matchers in table.events.items():
        for matcher in matchers:
            about = f" ({matcher.pattern})" if matcher.pattern not in ("", "*") else ""
            lines += [f"  {event}{about}: {c.command}" for c in matcher.commands]
    return lines + [f"  (left out) {problem}" for problem in problems]


def ask_about_project(settings: Settings, out: TextIO = sys.stdout) -> None:
    """The interactive prompt's question about the project's settings file (see the module
    doc); nothing when there is no such file or it is approved."""
    file = _project_file(settings)
    if file is None or not file.waiting_for_approval or file.loaded.digest is None:
        return
    from repl.interactive.sanitize import safe_for

    text = "\n".join([
        f"This project has a settings file that runs commands: {file.path}",
        *_commands(file),
        "A cloned repository can hold such a file. Its hooks run as you, in this project.",
    ])
    print(safe_for(out, text), file=out, flush=True)
    try:
        answer = input("Run this project's hooks? (approved until the file changes) [y/N] ")
    except (EOFError, KeyboardInterrupt):
        answer = ""
        print(file=out)
    if answer.strip().lower() in ("y", "yes"):
        approve(settings.memory_dir, file.path, file.loaded.digest)
        print("Approved; asked again when the file changes.", file=out, flush=True)
    else:
        print("The project's hooks will not run in this session.", file=out, flush=True)


def trust_project(settings: Settings, out: TextIO = sys.stdout) -> int:
    """``harness --trust-project``: approve the project's settings file as it is now."""
    file = _project_file(settings)
    if file is None or not file.loaded.exists:
        raise UsageError(f"No {settings.sandbox_dir}/.agent-harness/settings.json: nothing to "
                         "approve in this project.")
    if file.problem is not None or file.loaded.digest is None:
        raise UsageError(f"{file.problem}; nothing was approved.")
    approve(settings.memory_dir, file.path, file.loaded.digest)
    runs = _commands(file)
    print("\n".join([f"Approved {file.path} as it is now (sha256 {file.loaded.digest[:12]}…); "
                     "a change to it is asked about again.",
                     *(["It runs:", *runs] if runs else ["It runs no command."])]),
          file=out)
    return 0


def report_lines(settings: Settings) -> list[str]:
    """The settings files (used, not approved, bad), the hooks in force and the project's
    ``AGENTS.md`` files with how much of them a new session's prompt shows."""
    return settings_lines(settings) + instructions_lines(settings)


def settings_lines(settings: Settings) -> list[str]:
    """The settings files as a session opened now would read them, and their hooks."""
    from actors.hooks import hook_table

    files = read_settings(settings.memory_dir, settings.sandbox_dir)
    lines = []
    for file in files:
        label = f"Settings ({file.scope}):".ljust(20)
        if not file.loaded.exists:
            state = "none"
        elif file.problem is not None:
            state = f"not used: {file.loaded.problem}"
        elif file.waiting_for_approval:
            state = "not approved, so its hooks do not run (harness --trust-project)"
        else:
            table, _ = hook_table([file])
            state = "; ".join(table.summary()) or "no hooks"
            state = ("approved; " if file.scope == "project" else "") + state
        lines.append(f"{label}{file.path}: {state}")
    _, problems = hook_table(files)
    lines += [f"  {problem}" for problem in problems]
    return lines


def instructions_lines(settings: Settings) -> list[str]:
    """The project's ``AGENTS.md`` files as a new session would read them."""
    from actors.core.prompts import fit_instructions
    from actors.runtime.instructions import read_instructions

    found = read_instructions(settings.sandbox_dir, [settings.memory_dir])
    fitted = fit_instructions(found.files)
    shown = [f"{doc.path} ({len(doc.text) + doc.omitted:,} characters"
             + (f", {len(doc.text):,} of them in the prompt)" if doc.omitted else ")")
             for doc in fitted]
    return [f"{'Instructions:'.ljust(20)}{', '.join(shown) or 'no AGENTS.md'}",
            *(f"  {problem}" for problem in found.problems)]
