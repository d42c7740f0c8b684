"""The running session: the supervisor and the actors it starts (checkpoint writer, tool
executor, compactor), wired by memory streams."""
