"""The terminal mode of the interactive run (repl/interactive/cbreak.py), on a real
pseudo-terminal: keys wait unechoed for the next reader, and a Ctrl-D typed while
prompt_toolkit prints above its prompt (the terminal in cooked mode for that moment) is a
key, not an end-of-file the line discipline drops."""

from __future__ import annotations

import os
import select
import termios
from collections.abc import Iterator

import pytest

from repl.interactive import cbreak


@pytest.fixture
def pty_pair() -> Iterator[tuple[int, int]]:
    main, tty = os.openpty()
    yield main, tty
    os.close(main)
    os.close(tty)


def _read(fd: int) -> bytes:
    ready, _, _ = select.select([fd], [], [], 2)
    return os.read(fd, 100) if ready else b""


def _cooked(fd: int) -> list[object]:
    """What prompt_toolkit's ``cooked_mode`` (around a print above the prompt) sets."""
    mode = termios.tcgetattr(fd)
    mode[3] |= termios.ECHO | termios.ICANON | termios.IEXTEN | termios.ISIG
    mode[0] |= termios.ICRNL
    return mode


def test_a_ctrl_d_typed_during_a_moment_of_cooked_mode_reaches_the_reader(
    pty_pair: tuple[int, int],
) -> None:
    main, tty = pty_pair
    with cbreak.held(tty):
        raw = termios.tcgetattr(tty)
        termios.tcsetattr(tty, termios.TCSANOW, _cooked(tty))  # a notice is being printed
        os.write(main, b"\x04")  # Ctrl-D, typed in that moment
        # The line discipline takes the key (as end-of-file it would make the terminal
        # readable at once; as a key it waits in the line for a newline).
        select.select([tty], [], [], 0.5)
        termios.tcsetattr(tty, termios.TCSANOW, raw)  # the print is done: the prompt reads
        assert _read(tty) == b"\x04"


def test_the_mode_is_given_back_with_ctrl_d_as_end_of_file(pty_pair: tuple[int, int]) -> None:
    _, tty = pty_pair
    before = termios.tcgetattr(tty)
    with cbreak.held(tty):
        held = termios.tcgetattr(tty)
        assert not held[3] & (termios.ECHO | termios.ICANON) and held[3] & termios.ISIG
    assert termios.tcgetattr(tty) == before
    assert before[6][termios.VEOF] == b"\x04"  # the shell gets its Ctrl-D back
