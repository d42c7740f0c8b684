"""A package's names imported when first used (PEP 562), for packages the start must not load.

``__getattr__ = names_from(__name__, globals(), {"Name": "_module", ...})`` in a package's
``__init__``: the first look-up of ``Name`` imports ``package._module``, keeps the value in
the package's namespace (later look-ups do not come here) and returns it. The package names
the same imports under ``TYPE_CHECKING`` for the type checker. Pure: no I/O but the import.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def names_from(package: str, namespace: dict[str, Any],
               where: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: ``where`` maps each name to its module."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    return __getattr__
