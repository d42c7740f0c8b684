"""Keeping the model's reasoning apart from its answer, as the text streams in.

Servers hand reasoning over in three ways: a field of its own (``reasoning`` from ollama and
recent vLLM, ``reasoning_content`` from llama.cpp and older vLLM), which the assembly takes as
it is; inline in the content, as a leading block in the model family's own markup, when the
server does not extract it (llama.cpp ``--reasoning-format none``, ollama for models without
a thinking parser, vLLM without ``--reasoning-parser``); or, from recent llama.cpp builds
whose template opened the block in the prompt, as content that only *closes* it:
``…reasoning…</think>answer``.

The inline blocks, by family (:data:`FORMATS`; what llama.cpp's ``common/chat.cpp`` and
vLLM's ``vllm/reasoning/`` parsers take out when they do extract it):

- ``<think>…</think>``: DeepSeek R1, Qwen3, GLM, MiniMax, Nemotron, Hunyuan and most others;
- ``<|channel>thought\\n…<channel|>``: Gemma 4 (the word ``thought`` names the channel);
- ``[THINK]…[/THINK]``: Mistral's Magistral;
- ``<seed:think>…</seed:think>``: ByteDance Seed-OSS;
- ``◁think▷…◁/think▷``: Kimi;
- ``<|START_THINKING|>…<|END_THINKING|>``: Cohere Command A and R7B;
- ``<|channel|>analysis<|message|>…<|end|>``: gpt-oss, whose answer may then begin with
  ``<|start|>assistant<|channel|>final<|message|>`` (dropped).

:class:`ThinkSplitter` is fed content pieces and says, piece by piece, what is answer text and
what is reasoning. A partial tag at the end of a piece is held back until the next piece
decides it. A lone ``</think>`` can only be recognised when it arrives, after the text before
it was already passed on as answer: the splitter then says ``revealed`` (everything passed on
as answer so far was reasoning). Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["text", "reasoning", "revealed"]


@dataclass(frozen=True)
class Format:
    """One family's inline reasoning block. ``answer_prefix``: what may stand between the
    block's end and the answer, dropped with the block."""

    open: str
    close: str
    answer_prefix: str = ""


THINK = Format("<think>", "</think>")
FORMATS = (
    THINK,
    Format("<|channel>thought", "<channel|>"),  # Gemma 4
    Format("[THINK]", "[/THINK]"),  # Magistral
    Format("<seed:think>", "</seed:think>"),  # Seed-OSS
    Format("\u25c1think\u25b7", "\u25c1/think\u25b7"),  # Kimi
    Format("<|START_THINKING|>", "<|END_THINKING|>"),  # Cohere
    Format("<|channel|>analysis<|message|>", "<|end|>",  # gpt-oss
           answer_prefix="<|start|>assistant<|channel|>final<|message|>"),
)
LONE_CLOSE = THINK.close  # the only closing tag a server's prompt leaves open (issue 23320)


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
        self._state: Literal["start", "thinking", "after", "answer", "plain"] = "start"
        self._format = THINK  # the block being read (state "thinking", "after")
        self._buffer = ""  # held back: undecided start, or a possible partial tag
        self._answer_started = False  # leading whitespace of the answer is dropped

    def feed(self, piece: str) -> list[Piece]:
        if not self._buffer and (self._state == "plain" or (
                self._state == "answer" and "<" not in piece)):
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
        if self._state == "after" and self._format.answer_prefix.startswith(rest.lstrip()):
            return []  # the start of the prefix that precedes an answer, and no answer
        return self._text(rest)

    # -- states ------------------------------------------------------------------------

    def _step(self, out: list[Piece]) -> None:
        buf = self._buffer
        if self._state == "start":
            head = buf.lstrip()
            if not head:
                return
            for form in FORMATS:
                if head.startswith(form.open):
                    self._state, self._format = "thinking", form
                    self._buffer = head[len(form.open):]
                    return
            if any(form.open.startswith(head) for form in FORMATS):
                return  # could still become an opening tag
            self._state = "answer"
            return
        if self._state == "thinking":
            close = self._format.close
            end = buf.find(close)
            if end >= 0:
                out.append(Piece("reasoning", buf[:end]))
                self._state, self._buffer = "after", buf[end + len(close):]
                return
            keep = _held_suffix(buf, close)
            out.append(Piece("reasoning", buf[: len(buf) - keep]))
            self._buffer = buf[len(buf) - keep:]
            return
        if self._state == "after":  # the block ended: drop what precedes its answer
            prefix = self._format.answer_prefix
            head = buf.lstrip()
            if prefix and head.startswith(prefix):
                self._state, self._buffer = "plain", head[len(prefix):]
            elif prefix and prefix.startswith(head):
                return  # could still become the prefix
            else:
                self._state = "plain"
            return
        if self._state == "answer":  # no block opened: a </think> closes a hidden one
            end = buf.find(LONE_CLOSE)
            if end >= 0:
                out.append(Piece("revealed", buf[:end]))
                self._answer_started = False
                self._state, self._buffer = "plain", buf[end + len(LONE_CLOSE):]
                return
            keep = _held_suffix(buf, LONE_CLOSE)
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
