"""Shared fixtures. Async tests use anyio's plugin and run on both trio and asyncio."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.stores import BACKENDS, Stores, stores_for
from tests.support.tool_context import ToolSession, tool_session


class _SlowMarkerAudit:
    """Keeps ``-m "not slow"`` honest: a test that starts a Python program (``python -m``: the
    harness, a helper under tests/support/programs, the scripted server) or a pty without the
    ``slow`` marker fails at that moment, through an audit hook (nothing is patched). A
    tool's own short-lived workers (bash, the grep child) do not count."""

    def __init__(self) -> None:
        self.current: str | None = None  # the nodeid of a running test without the marker
        sys.addaudithook(self._audit)

    def _audit(self, event: str, args: tuple[Any, ...]) -> None:
        if self.current is None:
            return
        if event == "os.forkpty" or (
            event == "subprocess.Popen" and _is_python(args[0], args[1])
        ):
            test, self.current = self.current, None
            raise RuntimeError(f"{test} starts a Python process: mark it @pytest.mark.slow")


def _is_python(executable: Any, argv: Any) -> bool:
    """A ``python -m MODULE`` command line (possibly behind a wrapper such as unshare)."""
    words = [str(w) for w in argv] if isinstance(argv, list | tuple) else [str(argv)]
    return any(
        (w == sys.executable or Path(w).name.startswith("python"))
        and words[i + 1 : i + 2] == ["-m"]
        for i, w in enumerate(words)
    )


_audit = _SlowMarkerAudit()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Any:
    _audit.current = None if item.get_closest_marker("slow") else item.nodeid
    try:
        return (yield)
    finally:
        _audit.current = None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    _audit.current = None if item.get_closest_marker("slow") else item.nodeid
    try:
        return (yield)
    finally:
        _audit.current = None


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def memory_dir(tmp_path: Path) -> Path:
    return tmp_path / "memory"


@pytest.fixture
def memory(tmp_path: Path) -> Path:
    """The memory directory, made as the harness makes it (mode 0700)."""
    path = tmp_path / "memory"
    path.mkdir(mode=0o700)
    return path


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
    PostgreSQL is skipped unless AGENT_HARNESS_TEST_PG names a server (tests/support/stores.py)."""
    with stores_for(str(request.param)) as opened:
        yield opened


@pytest.fixture
def pg_stores() -> Iterator[Stores]:
    """PostgreSQL stores only (tests of what only the shared backend does)."""
    with stores_for("postgresql") as opened:
        yield opened


@pytest.fixture
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ToolSession]:
    """A real store (in a directory of its own, outside ``tmp_path``) with the session that
    tool calls belong to."""
    with tool_session(tmp_path_factory.mktemp("store")) as opened:
        yield opened


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A small project for the REPL's pty tests (a module may define its own instead)."""
    from tests.support.terminal import make_project

    return make_project(tmp_path)


@pytest.fixture
def terminals() -> Iterator[Any]:
    """The REPL's pseudo-terminals a test opened, closed (their processes ended) at its end."""
    from tests.support.terminal import open_terminals

    with open_terminals() as opened:
        yield opened
