"""The front end: the ``harness`` command line, print mode and the prompt_toolkit REPL."""
