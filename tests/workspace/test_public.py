"""The front end uses the workspace through its public names only: no module of ``repl/``
imports a private module of ``actors.workspace`` (the package's ``__init__`` is its face),
and every public name resolves."""

from __future__ import annotations

import ast
from pathlib import Path

import actors.workspace

REPL = Path(__file__).resolve().parents[2] / "repl"


def _imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
    return found


def test_repl_imports_only_public_names_of_the_workspace() -> None:
    private = [(str(path.relative_to(REPL)), module)
               for path in sorted(REPL.rglob("*.py")) for module in _imports(path)
               if module.startswith("actors.workspace.")
               and module.removeprefix("actors.workspace.").startswith("_")]
    assert private == []


def test_every_public_name_of_the_workspace_resolves() -> None:
    for name in actors.workspace.__all__:
        assert getattr(actors.workspace, name) is not None
