"""The openai SDK, imported when first needed, in a worker thread.

Importing ``openai`` takes about a second (its type definitions); imported with the rest of
the harness it would hold up the interactive prompt by that much. The model client starts
:func:`load` in the background as soon as it runs, so the SDK is ready by the first request
and the prompt does not wait for it. Two first calls at once are safe: Python's import lock
makes the second wait for the first (a module still being imported is never handed out).
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

import anyio


def loaded() -> ModuleType | None:
    """The SDK if it is wholly imported already (not while another thread imports it)."""
    module = sys.modules.get("openai")
    if module is None or getattr(getattr(module, "__spec__", None), "_initializing", False):
        return None
    return module


async def load() -> ModuleType:
    """The SDK, imported in a worker thread the first time. Cancellation: the import goes on
    in its thread; a later call finds it done."""
    module = loaded()
    if module is None:
        module = await anyio.to_thread.run_sync(importlib.import_module, "openai")
    return module
