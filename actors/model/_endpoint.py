"""What the harness knows about the endpoint it talks to: its URL, checked before anything is
sent, and which server it is (for hints), guessed from the URL and learned from its answers.

Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlsplit

from actors.core.errors import EndpointUnreachable

Server = Literal["ollama", "llama.cpp", "vllm", "unknown"]

OLLAMA_PORT = 11434
LLAMACPP_PORT = 8080
VLLM_PORT = 8000


def check_base_url(url: str) -> None:
    """Raise :class:`EndpointUnreachable` (with the fix) for a URL nothing could answer at:
    no scheme (``localhost:11434/v1``), a scheme other than http(s), no host."""
    text = url.strip()
    parts = urlsplit(text)
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

    def unreachable_hint(self) -> str:
        if self.server == "ollama":
            return "Is ollama running? Start it with 'ollama serve'."
        if self.server == "llama.cpp":
            return "Is llama-server running? Start it with 'llama-server -m MODEL.gguf --jinja'."
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


def guess_server(base_url: str) -> Server:
    try:
        port = urlsplit(base_url).port
    except ValueError:
        return "unknown"
    return {OLLAMA_PORT: "ollama", LLAMACPP_PORT: "llama.cpp", VLLM_PORT: "vllm"}.get(
        port or 0, "unknown")  # type: ignore[return-value]
