"""Shared fixtures. Async tests use anyio's plugin and run on both trio and asyncio."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.stores import BACKENDS, Stores, stores_for


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def memory_dir(tmp_path: Path) -> Path:
    return tmp_path / "memory"


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "project"
    path.mkdir()
    old = os.getcwd()
    os.chdir(path)
    try:
        yield path
    finally:
        os.chdir(old)


@pytest.fixture(params=BACKENDS)
def stores(request: pytest.FixtureRequest) -> Iterator[Stores]:
    """The stores of the backend under test (every store test runs on SQLite and PostgreSQL);
    PostgreSQL is skipped unless AGENT_HARNESS_TEST_PG names a server (see tests/stores.py)."""
    with stores_for(str(request.param)) as opened:
        yield opened


@pytest.fixture
def pg_stores() -> Iterator[Stores]:
    """PostgreSQL stores only (tests of what only the shared backend does)."""
    with stores_for("postgresql") as opened:
        yield opened
