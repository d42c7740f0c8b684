"""``python -m repl`` is the ``harness`` command (the console script calls :func:`main`)."""

import sys

from repl import secrecy, startup


def main() -> int:
    secrecy.hide_secrets()  # first: no process the harness starts reads them from it
    startup.pause()  # before the harness's own imports (repl/startup.py)
    from repl.cli import main as run

    return run()


if __name__ == "__main__":
    sys.exit(main())
