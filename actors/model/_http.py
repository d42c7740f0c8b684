"""The HTTP library under the openai SDK: httpx2 for openai >= 3, httpx before."""

from __future__ import annotations

try:
    import httpx2 as http
except ImportError:  # pragma: no cover - depends on the installed openai
    import httpx as http  # type: ignore[no-redef, import-not-found, unused-ignore]

__all__ = ["http"]
