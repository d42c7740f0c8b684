"""Session ids: new ones are 10 characters that cannot be misread; any id is checked before use.

New ids use lowercase letters and digits without the look-alikes ``0 o 1 l i`` (31
characters: about 8 × 10^14 ids), so an id read off a screen or typed from memory is the id
meant, and any unique prefix of it names it (``Store.resolve_id``). Older ids (mixed case,
``O`` and ``0``) stay valid: :func:`check_session_id` accepts any ``[A-Za-z0-9_-]+``.
"""

from __future__ import annotations

import os
import re

from actors.core.errors import InvalidSessionId

ALPHABET = "23456789abcdefghjkmnpqrstuvwxyz"
ID_LENGTH = 10
_VALID = re.compile(r"[A-Za-z0-9_-]+")
MAX_ID_LENGTH = 128


_UNBIASED = 256 - 256 % len(ALPHABET)  # bytes from here up would favour the first letters


def new_session_id() -> str:
    """A fresh id: 10 characters of :data:`ALPHABET` from the system's secure random source.

    ``os.urandom`` bytes, each below :data:`_UNBIASED` taken modulo the alphabet (uniform, as
    ``secrets.choice`` is; ``secrets`` itself is not imported: with hmac and hashlib it cost
    the start a few milliseconds)."""
    chosen: list[str] = []
    while len(chosen) < ID_LENGTH:
        chosen += [ALPHABET[b % len(ALPHABET)] for b in os.urandom(2 * ID_LENGTH)
                   if b < _UNBIASED]
    return "".join(chosen[:ID_LENGTH])


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
