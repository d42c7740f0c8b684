"""The wire formats of the servers people run, for the scripted server.

``Flavour`` is OpenAI's own format (the generic endpoint); :class:`Ollama`, :class:`LlamaCpp`
and :class:`VLLM` reproduce those servers, quirks included (each module cites the sources).
"""

from actors.testing.flavours._base import Flavour
from actors.testing.flavours.llamacpp import LlamaCpp
from actors.testing.flavours.ollama import Ollama
from actors.testing.flavours.vllm import VLLM

FLAVOURS: dict[str, type[Flavour]] = {
    "openai": Flavour, "ollama": Ollama, "llama.cpp": LlamaCpp, "vllm": VLLM,
}

__all__ = ["FLAVOURS", "VLLM", "Flavour", "LlamaCpp", "Ollama"]
