"""An attacker racing the file tools: python -m tests.support.programs.swapper PATH TARGET file|dir

Keeps replacing PATH with a symlink to TARGET and back with a real file ("file": by an
atomic rename over it) or a real directory ("dir": moved aside and made again, since a
directory cannot be renamed over a symlink), as fast as it can, until stdin closes. Prints
"ready" when it starts and the number of swaps when it stops."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable


def swap_file(path: str, target: str, stop: threading.Event) -> int:
    link, real = path + ".swap-link", path + ".swap-real"
    swaps = 0
    while not stop.is_set():
        for make, name in ((lambda n: os.symlink(target, n), link),
                           (lambda n: _write(n, "inside\n"), real)):
            try:
                make(name)
                os.rename(name, path)
                swaps += 1
            except OSError:
                pass
    return swaps


def swap_dir(path: str, target: str, stop: threading.Event) -> int:
    swaps = 0
    n = 0
    while not stop.is_set():
        n += 1
        swaps += _tried(os.rename, path, f"{path}.aside{n}")  # whatever directory is there
        swaps += _tried(os.symlink, target, path)
        if os.path.islink(path):
            swaps += _tried(os.unlink, path)
        swaps += _tried(os.mkdir, path)
    return swaps


def _tried(function: Callable[..., object], *args: str) -> int:
    try:
        function(*args)
    except OSError:
        return 0
    return 1


def _write(name: str, text: str) -> None:
    with open(name, "w") as f:
        f.write(text)


def main() -> None:
    path, target, kind = sys.argv[1:4]
    stop = threading.Event()
    count: list[int] = []
    worker = swap_dir if kind == "dir" else swap_file
    thread = threading.Thread(target=lambda: count.append(worker(path, target, stop)))
    thread.start()
    print("ready", flush=True)
    sys.stdin.read()
    stop.set()
    thread.join()
    print(count[0], flush=True)


if __name__ == "__main__":
    main()
