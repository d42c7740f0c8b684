"""``python -m repl`` is the ``harness`` command (the console script calls :func:`main`)."""

import sys

from repl import startup


def main() -> int:
    startup.pause()  # before the harness's own imports (repl/startup.py)
    from repl.cli import main as run

    return run()


if __name__ == "__main__":
    sys.exit(main())
