"""The harness's secrets: which variables hold them, and the password a store URL carries.

One rule names the secret variables: every ``OPENAI_*`` (the endpoint's key, base URL,
organisation, project) and every ``AGENT_HARNESS_*`` (the store URL, which may hold a
PostgreSQL password, the memory directory, the backend). The processes tools start are given
the environment without them (:mod:`actors.tools._environment`), and the harness command hides
them in its own initial environment (:mod:`repl.secrecy`). See docs/security.md.

A store URL's password (``postgresql://user:PASSWORD@host/db``, or ``?password=``) never
appears on the screen: :func:`url_secrets` finds it by libpq's grammar, with no driver
imported, even in a URL libpq would refuse, and :func:`redact` blanks it out of a message.
Pure functions, no I/O.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

SECRET_PREFIXES = ("OPENAI_", "AGENT_HARNESS_")
SECRET_PARAMETERS = ("password", "sslpassword")  # libpq parameters that hold a secret
HIDDEN = "***"

# ``password=VALUE`` in a keyword/value connection string: quoted, or up to white space
_KEYWORD_SECRET = re.compile(
    r"\b(?:" + "|".join(SECRET_PARAMETERS) + r")\s*=\s*('(?:[^'\\]|\\.)*'|\S+)"
)


def is_secret(name: str) -> bool:
    """Whether the environment variable ``name`` holds one of the harness's secrets."""
    return name.upper().startswith(SECRET_PREFIXES)


def url_secrets(url: str) -> list[str]:
    """The secrets written in the store URL ``url`` (as written and percent-decoded, longest
    first): the password of its user part, and the values of its ``password`` and
    ``sslpassword`` parameters (in a URL's query or a keyword/value string)."""
    found: list[str] = []
    _scheme, sep, rest = url.partition("://")
    if sep:
        # libpq: the user part ends at the first '@', unless a '/' comes before it
        at, slash = rest.find("@"), rest.find("/")
        if at >= 0 and (slash < 0 or at < slash):
            _user, colon, password = rest[:at].partition(":")
            if colon:
                found.append(password)
        query = rest.partition("?")[2]
        for pair in query.split("&"):
            key, equals, value = pair.partition("=")
            if equals and unquote(key) in SECRET_PARAMETERS:
                found.append(value)
    else:
        for match in _KEYWORD_SECRET.finditer(url):
            value = match.group(1)
            found.append(value)
            if value.startswith("'"):
                found.append(value[1:-1])
    found += [unquote(value) for value in found]
    return sorted({value for value in found if value}, key=len, reverse=True)


def has_password(url: str) -> bool:
    """Whether the store URL ``url`` carries a password (see :func:`url_secrets`)."""
    return bool(url_secrets(url))


def redact(text: str, url: str) -> str:
    """``text`` with every secret of the store URL ``url`` replaced by ``***``."""
    for secret in url_secrets(url):
        text = text.replace(secret, HIDDEN)
    return text
