"""Control tokens that stay text: what a model's chat markup is made of, neutralised in what
the harness sends.

Servers tokenize the whole prompt with the model's special tokens recognised anywhere in it
(llama.cpp parses them in the rendered template, ollama and vLLM's tokenizers match them in
text), so a file, a command's output, an attachment, a summary or an imported session that
holds ``<turn|>`` or ``<|im_end|>`` would put the real token in the prompt: the tool response
closes early, a user turn is faked. The data tags (:mod:`actors.core.data_tags`) cannot help:
the damage is done by the tokenizer, below the text.

:class:`ControlTokens` finds such texts and puts a zero-width space (U+200B) after their first
character: no tokenizer finds the token any more, and the model reads the same characters.
What it finds: every token of the served model that the server tells (llama.cpp: its
template's markup and its BOS and EOS, each checked with ``/tokenize``; see
:mod:`actors.model._preflight`), and always the shapes of the common families' control
tokens (:data:`AFTER_ANGLE`, :data:`AFTER_BRACKET`): ``<|…|>`` (ChatML, Llama 3, Phi,
Granite, Command R, gpt-oss), Gemma 4's ``<|turn>`` and ``<turn|>``, DeepSeek's ``<｜…｜>``,
Gemma's ``<start_of_turn>``, ``<bos>`` and ``<eos>``, Llama 2's ``<<SYS>>`` and Mistral's
``[INST]`` family. Markup that is also ordinary text (``<s>``, ``</s>``, ``<think>``,
``<tool_call>``) is neutralised only when the server says its model has it.

It works on a message's JSON text as a request sends it (:mod:`actors.model._body`), so a
stored message is neutralised without being parsed: the texts are matched in their JSON form
(``<|"|>`` is ``<|\\"|>`` there), and what is inserted is valid inside a JSON string, where
every ``<`` and ``[`` of such a token stands. Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

MARK = "\u200b"  # zero width space: breaks the token, not the text

# Each family's shape, without its first character (``<`` or ``[``), and what may follow that
# character: one pattern that starts with it, and looks one character ahead before trying the
# shapes, scans a long text several times faster than an alternation of whole shapes (HTML
# has a ``<`` every few characters).
AFTER_ANGLE = (
    # <|im_start|> <|eot_id|> <|"|> <|START_THINKING|> <|channel|>; Gemma 4's <|turn> <|channel>
    r"\|(?:[^\s<>|]{1,48}\||[a-z_]{1,32})>",
    r"[a-z_]{1,32}\|>",  # Gemma 4: <turn|> <channel|> <tool_call|> <tool_response|>
    "\uff5c[^\\s<>\uff5c]{1,48}\uff5c>",  # DeepSeek: <｜User｜> <｜tool▁calls▁begin｜>
    r"(?:start|end)_of_(?:turn|image)>",  # Gemma 2 and 3
    r"(?:bos|eos)>",  # Gemma
    r"</?SYS>>",  # Llama 2
)
ANGLE_NEXT = "|\uff5ca-z_<"  # the characters the shapes above begin with
AFTER_BRACKET = (
    r"/?(?:INST|SYSTEM_PROMPT|AVAILABLE_TOOLS|TOOL_CALLS|TOOL_RESULTS|TOOL_CONTENT|THINK"
    r"|ARGS|CALL_ID)\]",  # Mistral
)
_FAMILIES = re.compile(f"<(?:{'|'.join(AFTER_ANGLE)})|\\[(?:{'|'.join(AFTER_BRACKET)})")


def _json_form(token: str) -> str:
    """``token`` as it stands inside a JSON string written with ``ensure_ascii=False``."""
    return json.dumps(token, ensure_ascii=False)[1:-1]


def _marked(found: str) -> str:
    return found[:1] + MARK + found[1:]


class ControlTokens:
    """The control tokens of the common families and ``learned`` ones (a served model's own),
    found in text or in JSON text and neutralised (see the module)."""

    __slots__ = ("_pattern", "learned")

    def __init__(self, learned: Iterable[str] = ()) -> None:
        """``learned``: markup of the served model; only texts that begin with ``<`` or
        ``[`` are taken (in JSON text those stand inside strings, where the mark may go)."""
        self.learned = frozenset(t for t in learned if len(t) > 2 and t[0] in "<[")
        forms = sorted((f for f in map(_json_form, self.learned)
                        if not _FAMILIES.fullmatch(f)), key=len, reverse=True)
        angle = [*AFTER_ANGLE, *(re.escape(f[1:]) for f in forms if f[0] == "<")]
        bracket = [*AFTER_BRACKET, *(re.escape(f[1:]) for f in forms if f[0] == "[")]
        ahead = ANGLE_NEXT + "".join(re.escape(f[1]) for f in forms if f[0] == "<")
        self._pattern = re.compile(
            f"<(?=[{ahead}])(?:{'|'.join(angle)})|\\[(?:{'|'.join(bracket)})")

    def neutralise(self, text: str) -> str:
        """``text`` (or JSON text) with every control token broken by :data:`MARK`; the same
        object when it holds none (a long text is not copied for nothing)."""
        if self._pattern.search(text) is None:
            return text
        return self._pattern.sub(lambda m: _marked(m.group()), text)
