"""Which paths a snapshot leaves out: ``.gitignore`` rules, read as git reads them.

Each directory's rules are its parent's followed by those of its own ``.gitignore`` (a later
rule wins, so a deeper file overrides a higher one, and ``!pattern`` re-includes). A rule is
matched against the path relative to the project root:

* blank lines and ``#`` comments are skipped; ``\\#`` and ``\\!`` escape; trailing spaces go
  unless escaped;
* a trailing ``/`` makes the rule match directories only;
* a pattern with a ``/`` at its start or in its middle is anchored at its ``.gitignore``'s
  directory; one without matches a name at any depth below it;
* ``*`` and ``?`` never match ``/``; ``**/`` is any number of directories, ``/**`` everything
  inside; ``[...]`` is a character class (``[!...]`` negated).

An ignored directory is not entered, so nothing below it can be re-included (as in git).
Not read: ``.git/info/exclude`` and the user's global excludes file (the snapshot belongs to
the project, not to one clone's settings).

Speed: with no rule in force a check is one attribute test; otherwise one combined regular
expression says whether any rule matches, and only then are the rules tried from the last.
Pure functions; no I/O.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

MAX_RULES = 2_000  # rules in force in one directory (a larger .gitignore is cut, with a note)


@dataclass(frozen=True, slots=True)
class Rule:
    regex: re.Pattern[str]  # matched against the path relative to the project root
    negate: bool
    dir_only: bool


def _class(pattern: str, i: int) -> tuple[str, int] | None:
    """The regex of the character class starting at ``pattern[i] == '['`` and the index past
    it (None: no closing bracket, so the ``[`` is literal)."""
    j = i + 1
    negate = j < len(pattern) and pattern[j] in "!^"
    if negate:
        j += 1
    start = j
    if j < len(pattern) and pattern[j] == "]":
        j += 1
    while j < len(pattern) and pattern[j] != "]":
        j += 2 if pattern[j] == "\\" else 1
    if j >= len(pattern):
        return None
    body = pattern[start:j]
    out = []
    k = 0
    while k < len(body):
        c = body[k]
        if c == "\\" and k + 1 < len(body):
            out.append(re.escape(body[k + 1]))
            k += 2
            continue
        out.append("-" if c == "-" else re.escape(c))
        k += 1
    return ("[^/" if negate else "[") + "".join(out) + "]", j + 1


def glob_regex(pattern: str) -> str:
    """The regex (unanchored text) of one gitignore glob with no leading or trailing ``/``."""
    out = []
    i = 0
    n = len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            j = i
            while j < n and pattern[j] == "*":
                j += 1
            stars = j - i
            at_start = i == 0 or pattern[i - 1] == "/"
            at_end = j == n or pattern[j] == "/"
            if stars >= 2 and at_start and at_end:
                if j == n:  # "/**" at the end: everything inside
                    out.append(".*")
                else:  # "**/": zero or more directories
                    out.append("(?:.*/)?")
                    j += 1
            else:
                out.append("[^/]*")
            i = j
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            found = _class(pattern, i)
            if found is None:
                out.append(re.escape(c))
                i += 1
            else:
                out.append(found[0])
                i = found[1]
        elif c == "\\" and i + 1 < n:
            out.append(re.escape(pattern[i + 1]))
            i += 2
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


def _strip_trailing_spaces(line: str) -> str:
    end = len(line)
    while end > 0 and line[end - 1] == " ":
        if end >= 2 and line[end - 2] == "\\":
            break
        end -= 1
    return line[:end]


def parse(text: str, base: str) -> list[Rule]:
    """The rules of a ``.gitignore`` in directory ``base`` ("" for the project root, else a
    relative path without a trailing ``/``)."""
    prefix = re.escape(base + "/") if base else ""
    rules = []
    for raw in text.splitlines():
        line = _strip_trailing_spaces(raw.rstrip("\r"))
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        if negate or line.startswith(("\\!", "\\#")):
            line = line[1:]
        dir_only = line.endswith("/") and not line.endswith("\\/")
        line = line.rstrip("/") if dir_only else line
        if not line:
            continue
        anchored = "/" in line
        line = line.lstrip("/")
        if not line:
            continue
        body = glob_regex(line)
        regex = prefix + body if anchored else prefix + "(?:.*/)?" + body
        try:
            compiled = re.compile(regex + r"\Z", re.DOTALL)
        except re.error:
            continue  # git skips a pattern it cannot read, too
        rules.append(Rule(compiled, negate, dir_only))
    return rules


class Rules:
    """The rules in force in one directory (see the module doc). Immutable."""

    __slots__ = ("_any", "_any_file", "digest", "rules")

    EMPTY: Rules

    def __init__(self, rules: tuple[Rule, ...], digest: bytes = b"") -> None:
        self.rules = rules[-MAX_RULES:]
        # What the rules were made from (the .gitignore files along the path, in order), so
        # that decisions made under them can be reused by a later process: equal digests,
        # equal rules. b"": none (or made directly, as tests do).
        self.digest = digest or (_digest_of(self.rules) if self.rules else b"")
        self._any = self._combined(self.rules)
        self._any_file = self._combined(tuple(r for r in self.rules if not r.dir_only))

    @staticmethod
    def _combined(rules: tuple[Rule, ...]) -> re.Pattern[str] | None:
        if not rules:
            return None
        return re.compile("|".join(f"(?:{r.regex.pattern})" for r in rules), re.DOTALL)

    def extended(self, text: str, base: str) -> Rules:
        """These rules followed by those of ``text``, a ``.gitignore`` in ``base``."""
        own = parse(text, base)
        if not own:
            return self
        digest = hashlib.blake2b(b"\0".join((self.digest, base.encode("utf-8", "surrogateescape"),
                                             text.encode("utf-8", "surrogateescape"))),
                                 digest_size=16).digest()
        return Rules(self.rules + tuple(own), digest)

    def ignored(self, path: str, is_dir: bool) -> bool:
        """Whether ``path`` (relative to the project root) is left out."""
        combined = self._any if is_dir else self._any_file
        if combined is None or combined.match(path) is None:
            return False
        for rule in reversed(self.rules):
            if (is_dir or not rule.dir_only) and rule.regex.match(path):
                return not rule.negate
        return False


def _digest_of(rules: tuple[Rule, ...]) -> bytes:
    text = "\0".join(f"{r.regex.pattern}\1{r.negate}\1{r.dir_only}" for r in rules)
    return hashlib.blake2b(text.encode("utf-8", "surrogateescape"), digest_size=16).digest()


Rules.EMPTY = Rules(())
