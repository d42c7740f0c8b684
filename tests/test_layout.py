"""The layout's rules, read from the source (every import statement, those inside functions
and ``TYPE_CHECKING`` blocks included): no module under ``tests/`` imports a test module
(what tests share lives in ``tests/support``), and no module of ``actors/`` or ``repl/``
imports another package's private module (a name starting with ``_``)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Private modules imported from outside their package today, each with its importer. They
# are being removed where those packages are restructured; a new one fails the test, and so
# does an entry here that no longer happens (delete it then).
KNOWN_PRIVATE_IMPORTS = {
    # the executor keeps the tools' process groups (ProcessGroup)
    ("actors.runtime.tool_executor", "actors.tools._base"),
    # the workspace reaches the project's files through the file tools' Sandbox
    ("actors.workspace._restore", "actors.tools._sandbox"),
    ("actors.workspace._snapshot", "actors.tools._sandbox"),
    ("actors.workspace._workspace", "actors.tools._sandbox"),
}


def _modules(top: str) -> dict[str, Path]:
    """The dotted name of every module under ``top`` (a package's name for its
    ``__init__``)."""
    found = {}
    for path in sorted((REPO / top).rglob("*.py")):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imports(name: str, path: Path, known: dict[str, Path]) -> Iterator[str]:
    """The modules ``path`` (module ``name``) imports: ``from P import M`` names ``P.M``
    too when that is a module of ``known``; relative imports resolved."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            yield base
            for alias in node.names:
                if f"{base}.{alias.name}" in known:
                    yield f"{base}.{alias.name}"


def test_no_module_imports_a_test_module() -> None:
    modules = _modules("tests")
    tests = {name for name in modules if name.rpartition(".")[2].startswith("test_")}
    assert len(tests) > 90  # the walk found the suite
    found = sorted(
        f"{name} imports {imported}"
        for name, path in modules.items()
        for imported in _imports(name, path, modules)
        if imported in tests
    )
    assert found == [], "move what they share into tests/support:\n" + "\n".join(found)


def _private_imports() -> set[tuple[str, str]]:
    """(importer, private module) for each private module of ``actors`` or ``repl`` imported
    by a module outside the package that holds it."""
    modules = {**_modules("actors"), **_modules("repl")}
    found = set()
    for name, path in modules.items():
        for imported in _imports(name, path, modules):
            parts = imported.split(".")
            for i, part in enumerate(parts):
                if part.startswith("_") and not part.startswith("__"):
                    owner = ".".join(parts[:i])
                    if not f"{name}.".startswith(f"{owner}."):
                        found.add((name, ".".join(parts[: i + 1])))
                    break
    return found


def test_no_package_imports_another_package_s_private_module() -> None:
    found = _private_imports()
    new = sorted(f"{a} imports {b}" for a, b in found - KNOWN_PRIVATE_IMPORTS)
    gone = sorted(f"{a} imports {b}" for a, b in KNOWN_PRIVATE_IMPORTS - found)
    assert new == [], "import the package's public names instead:\n" + "\n".join(new)
    assert gone == [], "no longer imported: delete from KNOWN_PRIVATE_IMPORTS:\n" + "\n".join(
        gone
    )
