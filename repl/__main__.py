"""``python -m repl`` is the ``harness`` command."""

import sys

from repl.cli import main

sys.exit(main())
