"""The interactive prompt_toolkit REPL: the app, its rendering, commands and completion."""
