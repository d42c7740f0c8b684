"""What the harness knows about the endpoint it talks to: its URL, checked before anything is
sent, and which server it is (for hints), guessed from the URL and learned from its answers.

Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlsplit

from actors.core.errors import EndpointUnreachable

Server = Literal["ollama", "llama.cpp", "vllm", "unknown"]

OLLAMA_PORT = 11434
LLAMACPP_PORT = 8080
VLLM_PORT = 8000
_PORTS: dict[int, Server] = {OLLAMA_PORT: "ollama", LLAMACPP_PORT: "llama.cpp",
                             VLLM_PORT: "vllm"}
_OWNERS: dict[str, Server] = {"vllm": "vllm", "llamacpp": "llama.cpp", "library": "ollama",
                              "ollama": "ollama"}


def check_base_url(url: str) -> None:
    """Raise :class:`EndpointUnreachable` (with the fix) for a URL nothing could answer at:
    no scheme (``localhost:11434/v1``), a scheme other than http(s), no host."""
    text = url.strip()
    try:
        parts = urlsplit(text)
    except ValueError as exc:
        raise EndpointUnreachable(f"the URL is not valid ({exc})", endpoint=text) from None
    scheme = parts.scheme.lower()
    if "://" not in text:
        fixed = "http://" + text.lstrip("/")
        raise EndpointUnreachable(
            "the URL has no scheme", endpoint=text,
            hint=f"Use --base-url {fixed}",
        )
    if scheme not in ("http", "https"):
        rest = text.split("://", 1)[1]
        raise EndpointUnreachable(
            f"unsupported scheme '{parts.scheme}://'", endpoint=text,
            hint=f"Use http:// or https://, e.g. --base-url http://{rest}",
        )
    try:
        host, port = parts.hostname, parts.port
    except ValueError as exc:
        raise EndpointUnreachable(f"the URL is not valid ({exc})", endpoint=text) from None
    if not host:
        raise EndpointUnreachable("the URL has no host", endpoint=text,
                                  hint="Use e.g. --base-url http://localhost:11434/v1")
    del port


def base_url_problem(url: str) -> str | None:
    """What is wrong with ``--base-url``, as one line for the user (None: nothing)."""
    try:
        check_base_url(url)
    except EndpointUnreachable as exc:
        return f"--base-url {url.strip()}: {exc.what}." + (f" {exc.hint}." if exc.hint else "")
    return None


def root_url(base_url: str) -> str:
    """The server's root: the base URL without its ``/v1`` (ollama's native API lives there)."""
    base = base_url.rstrip("/")
    return base[: -len("/v1")] if base.endswith("/v1") else base


def with_v1(base_url: str) -> str:
    return base_url.rstrip("/") + "/v1"


@dataclass
class Endpoint:
    """The endpoint's URL and what is known about the server behind it."""

    base_url: str
    model: str
    server: Server = "unknown"
    models: list[str] = field(default_factory=list)  # from /v1/models, when listed
    context_length: int | None = None  # the context the server will really use
    context_source: str = ""  # how it was learned, for the warning
    slots: int | None = None  # llama.cpp: requests served at once (each gets context_length)
    renders_reasoning: bool = False  # its chat template reads the turn's reasoning_content
    control_tokens: frozenset[str] = frozenset()  # the served model's, as the server told

    def __post_init__(self) -> None:
        if self.server == "unknown":
            self.server = guess_server(self.base_url)

    @property
    def named(self) -> str:
        return {"ollama": "ollama", "llama.cpp": "llama.cpp", "vllm": "vLLM"}.get(
            self.server, "the server")

    def learn_from_fingerprint(self, fingerprint: str) -> None:
        """``system_fingerprint`` of a chunk: ollama says ``fp_ollama``, llama.cpp its build
        (``b6097-9515c613``)."""
        if fingerprint == "fp_ollama":
            self.server = "ollama"
        elif fingerprint[:1] == "b" and "-" in fingerprint and fingerprint[1:2].isdigit():
            self.server = "llama.cpp"

    def learn_from_models(self, payload: object) -> list[str]:
        """The ids in a ``/v1/models`` answer; its ``owned_by`` names the server (ollama says
        ``library``, vLLM ``vllm``, llama.cpp ``llamacpp``), and vLLM gives the context."""
        data = payload.get("data") if isinstance(payload, dict) else None
        ids: list[str] = []
        for item in data if isinstance(data, list) else []:
            if not isinstance(item, dict) or not item.get("id"):
                continue
            ids.append(str(item["id"]))
            owner = str(item.get("owned_by", "")).lower()
            self.server = _OWNERS.get(owner, self.server)
            if str(item["id"]) == self.model and isinstance(item.get("max_model_len"), int):
                self.context_length = item["max_model_len"]
                self.context_source = "max_model_len in /v1/models"
        self.models = ids
        return ids

    def learn_from_props(self, props: object) -> None:
        """What llama.cpp's ``/props`` says: the context of one slot (``n_ctx``; with
        ``--no-kv-unified`` each of the ``total_slots`` gets ``-c`` divided by their
        number) and whether its chat template renders an assistant message's
        ``reasoning_content`` (see :func:`template_renders_reasoning`)."""
        if not isinstance(props, dict):
            return
        self.server = "llama.cpp"
        settings = props.get("default_generation_settings")
        n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
        if isinstance(n_ctx, int) and not isinstance(n_ctx, bool) and n_ctx > 0:
            self.context_length = n_ctx
            self.context_source = "n_ctx in /props"
        slots = props.get("total_slots")
        if isinstance(slots, int) and not isinstance(slots, bool) and slots > 0:
            self.slots = slots
        self.renders_reasoning = template_renders_reasoning(props)

    def has_model(self) -> bool | None:
        """Whether the listed models include ours (None: nothing listed, or llama.cpp, which
        serves its one model under any name). ollama lists ``gemma4:latest`` for ``gemma4``."""
        if not self.models or self.server == "llama.cpp":
            return None
        wanted = {self.model, self.model + ":latest"} if ":" not in self.model else {self.model}
        return bool(wanted & set(self.models))

    def unreachable_hint(self) -> str:
        if self.server == "ollama":
            return "Is ollama running? Start it with 'ollama serve'."
        if self.server == "llama.cpp":
            return ("Is llama-server running? Start it with 'llama-server -m MODEL.gguf -c 32768 "
                    "-np 1'.")
        if self.server == "vllm":
            return "Is vLLM running? Start it with 'vllm serve MODEL'."
        return "Is the server running? Check --base-url (or $OPENAI_BASE_URL)."

    def missing_v1_hint(self) -> str:
        if self.base_url.rstrip("/").endswith("/v1"):
            return ""
        return f"The URL may need /v1: --base-url {with_v1(self.base_url)}"

    def pull_hint(self) -> str:
        if self.server == "ollama":
            return f"Pull it with 'ollama pull {self.model}'."
        return "Check --model."


def template_renders_reasoning(props: dict[str, object]) -> bool:
    """Whether the chat template llama.cpp reports renders ``reasoning_content``: its own
    probe says so (``chat_template_caps.supports_preserve_reasoning``: an earlier turn's
    reasoning is rendered), or the template reads the field at all (Gemma 4's renders it
    only after the last user message, where the probe does not look)."""
    caps = props.get("chat_template_caps")
    if isinstance(caps, dict) and caps.get("supports_preserve_reasoning") is True:
        return True
    template = props.get("chat_template")
    return isinstance(template, str) and "reasoning_content" in template


_MARKUP = re.compile(r"<[^\s<>]{1,48}>|\[/?[A-Z_]{2,32}\]")


def markup_candidates(props: dict[str, object]) -> list[str]:
    """What may be the served model's control tokens, from llama.cpp's ``/props``: the
    markup its chat template writes (``<|turn>``, ``<|"|>``, ``[INST]``) and its BOS and EOS
    (the server's ``/tokenize`` tells which are single special tokens)."""
    found: dict[str, None] = {}
    template = props.get("chat_template")
    if isinstance(template, str):
        found.update(dict.fromkeys(_MARKUP.findall(template)))
    for key in ("bos_token", "eos_token"):
        token = props.get(key)
        if isinstance(token, str) and 1 < len(token) <= 48 and not token.isspace():
            found[token] = None
    return list(found)


def single_tokens(candidates: list[str], tokenized: object) -> frozenset[str]:
    """The candidates that ``/tokenize`` (of them joined by newlines, with ``parse_special``
    and ``with_pieces``) kept whole, as one piece each."""
    tokens = tokenized.get("tokens") if isinstance(tokenized, dict) else None
    pieces = {t.get("piece") for t in tokens if isinstance(t, dict)} if isinstance(
        tokens, list) else set()
    return frozenset(c for c in candidates if c in pieces)


def guess_server(base_url: str) -> Server:
    try:
        port = urlsplit(base_url).port
    except ValueError:
        return "unknown"
    return _PORTS.get(port or 0, "unknown")
