"""Keeping the model's reasoning apart from its answer, as the text streams in.

Servers hand reasoning over in three ways: a field of its own (``reasoning`` from ollama and
recent vLLM, ``reasoning_content`` from llama.cpp and older vLLM), which the assembly takes as
it is; inline in the content as a leading ``<think>…</think>`` block (ollama for some models,
llama.cpp ``--reasoning-format none``); or, from recent llama.cpp builds whose template opened
the block in the prompt, as content that only *closes* it: ``…reasoning…</think>answer``.

:class:`ThinkSplitter` is fed content pieces and says, piece by piece, what is answer text and
what is reasoning. A partial tag at the end of a piece is held back until the next piece
decides it. A lone ``</think>`` can only be recognised when it arrives, after the text before
it was already passed on as answer: the splitter then says ``revealed`` (everything passed on
as answer so far was reasoning). Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

OPEN = "<think>"
CLOSE = "</think>"

Kind = Literal["text", "reasoning", "revealed"]


@dataclass(frozen=True)
class Piece:
    """``text``: answer; ``reasoning``: reasoning; ``revealed``: the answer passed on so far
    was reasoning, and ``text`` is the reasoning that came with the closing tag."""

    kind: Kind
    text: str


def _held_suffix(text: str, tag: str) -> int:
    """Length of the longest end of ``text`` that could be the start of ``tag``."""
    for n in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-n:]):
            return n
    return 0


class ThinkSplitter:
    """Splits streamed content into answer and reasoning (see the module docstring)."""

    def __init__(self) -> None:
        self._state: Literal["start", "thinking", "answer", "plain"] = "start"
        self._buffer = ""  # held back: undecided start, or a possible partial tag
        self._answer_started = False  # leading whitespace of the answer is dropped

    def feed(self, piece: str) -> list[Piece]:
        if self._state in ("answer", "plain") and not self._buffer and "<" not in piece:
            return self._text(piece)  # no tag can start in it: all answer (the usual piece)
        self._buffer += piece
        out: list[Piece] = []
        while True:
            before = (self._state, self._buffer)
            self._step(out)
            if (self._state, self._buffer) == before:
                return [p for p in out if p.text or p.kind == "revealed"]

    def finish(self) -> list[Piece]:
        """The content ended: whatever is held back is what it looked like."""
        rest, self._buffer = self._buffer, ""
        if not rest:
            return []
        if self._state == "thinking":
            return [Piece("reasoning", rest)]
        return self._text(rest)

    # -- states ------------------------------------------------------------------------

    def _step(self, out: list[Piece]) -> None:
        buf = self._buffer
        if self._state == "start":
            head = buf.lstrip()
            if not head or (len(head) < len(OPEN) and OPEN.startswith(head)):
                return  # could still become <think>
            if head.startswith(OPEN):
                self._state, self._buffer = "thinking", head[len(OPEN):]
            else:
                self._state = "answer"
            return
        if self._state == "thinking":
            end = buf.find(CLOSE)
            if end >= 0:
                out.append(Piece("reasoning", buf[:end]))
                self._state, self._buffer = "plain", buf[end + len(CLOSE):]
                return
            keep = _held_suffix(buf, CLOSE)
            out.append(Piece("reasoning", buf[: len(buf) - keep]))
            self._buffer = buf[len(buf) - keep:]
            return
        if self._state == "answer":  # no <think> opened: a </think> closes a hidden one
            end = buf.find(CLOSE)
            if end >= 0:
                out.append(Piece("revealed", buf[:end]))
                self._answer_started = False
                self._state, self._buffer = "plain", buf[end + len(CLOSE):]
                return
            keep = _held_suffix(buf, CLOSE)
            out.extend(self._text(buf[: len(buf) - keep]))
            self._buffer = buf[len(buf) - keep:]
            return
        out.extend(self._text(buf))  # plain: after the reasoning, everything is answer
        self._buffer = ""

    def _text(self, text: str) -> list[Piece]:
        if not self._answer_started:
            text = text.lstrip()
            if not text:
                return []
            self._answer_started = True
        return [Piece("text", text)]
