"""The garbage collector is paused only while the harness starts (repl/startup.py): every
way out of ``main`` gives it back, and a collector someone else turned off stays off."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from repl import startup
from repl.cli import main


@pytest.fixture(autouse=True)
def collector() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    try:
        yield
    finally:
        startup.resume()
        if was:
            gc.enable()
        else:
            gc.disable()


def test_pause_and_resume() -> None:
    startup.pause()
    assert not gc.isenabled()
    startup.resume()
    assert gc.isenabled()
    gc.disable()
    startup.resume()  # once only: a later resume does not undo someone else's disable
    assert not gc.isenabled()


def test_a_collector_turned_off_before_stays_off() -> None:
    gc.disable()
    startup.pause()
    startup.resume()
    assert not gc.isenabled()


@pytest.mark.parametrize("argv", [
    ["--version"],                      # argparse exits (SystemExit)
    ["--bogus"],                        # a usage error: exit 2
    ["--list-sessions"],                # a session command
    ["--yes"],                          # a combination refused (UsageError)
])
def test_every_way_out_of_main_gives_the_collector_back(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("AGENT_HARNESS_MEMORY_DIR", str(tmp_path / "memory"))
    monkeypatch.delenv("AGENT_HARNESS_STORE", raising=False)
    monkeypatch.chdir(tmp_path)
    with contextlib.suppress(SystemExit):
        main(argv)
    assert gc.isenabled()
