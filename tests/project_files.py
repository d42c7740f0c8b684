"""What a test project holds on disk, to compare a project before and after a rewind."""

from __future__ import annotations

import os
import stat
from pathlib import Path


def listing(root: Path) -> dict[str, object]:
    """Everything under ``root`` as it is on disk: content, links, modes (no .git)."""
    found: dict[str, object] = {}
    for top, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in [*dirs, *files]:
            path = os.path.join(top, name)
            rel = os.path.relpath(path, root)
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                found[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                found[rel] = "dir"
                if os.path.islink(path):
                    dirs.remove(name)
            else:
                found[rel] = (Path(path).read_bytes(), bool(st.st_mode & 0o100))
    return found
