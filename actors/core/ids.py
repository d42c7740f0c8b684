"""Session ids: new ones are 10 random letters and digits; any id is checked before use."""

from __future__ import annotations

import re
import secrets
import string

from actors.core.errors import InvalidSessionId

_ALPHABET = string.ascii_letters + string.digits
_VALID = re.compile(r"[A-Za-z0-9_-]+")
MAX_ID_LENGTH = 128


def new_session_id() -> str:
    """A fresh id: 10 characters of [A-Za-z0-9] from the system's secure random source."""
    return "".join(secrets.choice(_ALPHABET) for _ in range(10))


def check_session_id(session_id: object) -> str:
    """Return ``session_id`` if it is a usable id, else raise :class:`InvalidSessionId`.

    Runs before an id reaches a file name or a query: path separators, dots, NUL, spaces,
    non-ASCII letters and over-long ids are refused.
    """
    if (
        not isinstance(session_id, str)
        or len(session_id) > MAX_ID_LENGTH
        or not _VALID.fullmatch(session_id)
    ):
        raise InvalidSessionId(session_id)
    return session_id
