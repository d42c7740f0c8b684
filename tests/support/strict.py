"""Skips that CI must not take: with ``AGENT_HARNESS_TEST_STRICT=1`` (``.ci/run`` sets it) a
test that cannot get what it needs (a PostgreSQL server, a file system to fill) fails instead
of being skipped, so a green run means those tests ran."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

STRICT_ENV = "AGENT_HARNESS_TEST_STRICT"


def strict() -> bool:
    return os.environ.get(STRICT_ENV, "") not in ("", "0")


def unavailable(reason: str) -> NoReturn:
    """Skip the test for ``reason``, or fail it when the run is strict."""
    if strict():
        pytest.fail(f"{reason} ({STRICT_ENV} is set: this test must run here)", pytrace=False)
    pytest.skip(reason)
