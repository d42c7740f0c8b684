"""The HTTP library under the openai SDK (a dependency of it): httpx2 for openai >= 3,
httpx before.

Imported when first used, not with the harness: importing it (and ``ssl``) takes about a
tenth of a second, which would hold up the interactive prompt. The first use is making the
connection, in a worker thread (:func:`actors.model._connection.connect`).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx2 as http
else:

    class _Lazy:
        """The module, imported on the first attribute looked up."""

        _module: ModuleType | None = None

        def __getattr__(self, name: str) -> Any:
            module = type(self)._module
            if module is None:
                try:
                    module = importlib.import_module("httpx2")
                except ImportError:  # pragma: no cover - depends on the installed openai
                    module = importlib.import_module("httpx")
                type(self)._module = module
            return getattr(module, name)

    http = _Lazy()

__all__ = ["http"]
