"""The REPL's backslash commands by name, with what each does: what completion offers and
``\\help`` lists.

Apart from the commands themselves (:mod:`repl.interactive.commands`, which import the store
and the runtime's vocabulary) because the prompt's completer needs the names before the
first prompt is drawn, and nothing else of the commands until one is run.
"""

from __future__ import annotations

COMMANDS: dict[str, str] = {
    "\\help": "show the commands and key bindings",
    "\\sessions": "this project's sessions with titles and previews (\\sessions --all: every "
                   "project's)",
    "\\info": "this session's id, title, counts, compactions and usage (or \\info ID)",
    "\\title": "\\title TEXT: name this session",
    "\\compact": "summarise older turns now",
    "\\fork": "copy this session (or \\fork ID) into a new one; you stay here",
    "\\rewind": "go back to before a message you typed: the conversation (the rest is kept "
                "as a fork), the files, or both; \\rewind undo",
    "\\resume": "pick another session to switch to (or \\resume ID)",
    "\\pin": "\\pin TEXT: an instruction kept verbatim across compactions",
    "\\todos": "show the to-do list",
    "\\result": "show the last tool result whole, paged (or \\result N)",
    "\\thinking": "show the model's last reasoning whole",
    "\\approvals": "standing approvals; \\approvals keep (the last run's), \\approvals clear",
    "\\mode": "the permission mode: \\mode default|acceptEdits|dangerouslySkipPermissions "
               "(Shift-Tab cycles); saved with the session",
    "\\model": "the model: \\model NAME switches (Tab completes the server's models); "
                "saved with the session",
    "\\files": "the files each tool call changed (\\files diff: with the diffs)",
    "\\doctor": "check the model endpoint: reachable, the model, tool calls, its context",
    "\\exit": "leave (also Ctrl-D)",
}
TAKES_SESSION_ID = ("\\info", "\\fork", "\\resume")
MODES = {  # actors.core.config.Mode's values, and what each means
    "default": "edits and commands are asked about",
    "acceptEdits": "edits inside the project are made without asking (each diff is shown); "
                   "commands are asked about",
    "dangerouslySkipPermissions": "nothing is asked",
}
