"""Files that make something run without being asked to: writing one always asks.

Some files are code that runs when the user does something unrelated to the project's own
code: git runs ``.git/config``'s ``core.fsmonitor`` and ``.git/hooks/*`` at the next
``git status``; direnv runs ``.envrc`` on ``cd``; a shell runs its rc files when it starts; an
editor runs ``.vscode/tasks.json`` when the folder is opened; Python runs ``*.pth`` files and
``sitecustomize.py`` at every start. A write to one of them is a shell command in disguise, so
the file tools ask for it in every mode but dangerouslySkipPermissions, even in acceptEdits.

:func:`autorun_reason` decides from the path's components inside the sandbox (after symlinks
were followed, and as written), compared without letter case (case-insensitive file systems).
"""

from __future__ import annotations

from collections.abc import Sequence

# Directories whose every file is configuration that runs commands.
_DIRECTORIES = {
    ".git": "git runs its config and hooks as commands",
    ".hg": "Mercurial runs its hooks as commands",
    ".ssh": "ssh runs commands from its config and keys decide who logs in",
    ".vscode": "the editor runs tasks and settings from it when the folder opens",
    ".husky": "git hooks run it on commit",
    ".agent-harness": "its settings hold hooks the harness runs (after the user approves them)",
    ".claude": "Claude Code runs the hooks in its settings",
}
# Directories under .config whose files run at login or shell start.
_CONFIG_DIRECTORIES = {
    "autostart": "the desktop runs it at login",
    "systemd": "systemd runs its units",
    "fish": "fish runs it when a shell starts",
    "git": "git runs commands from its config",
    "mise": "mise runs its hooks on cd",
    "environment.d": "the session reads it at login",
}
_SHELL_FILES = {
    ".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile", ".zshrc",
    ".zshenv", ".zprofile", ".zlogin", ".zlogout", ".kshrc", ".mkshrc", ".cshrc", ".tcshrc",
    ".login", ".logout", ".xprofile", ".xinitrc", ".xsession", ".xsessionrc", ".inputrc",
    ".pam_environment",
}
_FILES = {
    ".envrc": "direnv runs it on cd",
    ".gitconfig": "git runs commands from its config",
    ".mise.toml": "mise runs its hooks on cd",
    "mise.toml": "mise runs its hooks on cd",
    ".pre-commit-config.yaml": "git commit runs its hooks",
    "sitecustomize.py": "Python runs it at every start",
    "usercustomize.py": "Python runs it at every start",
}


def autorun_reason(*paths: Sequence[str]) -> str | None:
    """Why writing the file at any of ``paths`` (components inside the sandbox) must be asked,
    or None. Each reason names the path and what would run it."""
    for parts in paths:
        reason = _reason(parts)
        if reason:
            return reason
    return None


def _reason(parts: Sequence[str]) -> str | None:
    lowered = [part.lower() for part in parts if part not in ("", ".")]
    if not lowered:
        return None
    shown = "/".join(parts)
    for index, part in enumerate(lowered):
        if part in _DIRECTORIES and (index < len(lowered) - 1 or part == ".git"):
            return f"'{shown}' is under {part}/: {_DIRECTORIES[part]}"
        if part == ".config" and index < len(lowered) - 1:
            child = lowered[index + 1]
            if child in _CONFIG_DIRECTORIES:
                return f"'{shown}' is under .config/{child}/: {_CONFIG_DIRECTORIES[child]}"
    name = lowered[-1]
    if name in _SHELL_FILES:
        return f"'{shown}' is a shell start-up file: a shell runs it when it starts"
    if name in _FILES:
        return f"'{shown}': {_FILES[name]}"
    if name.endswith(".pth"):
        return f"'{shown}' is a .pth file: Python runs its import lines at every start"
    return None
