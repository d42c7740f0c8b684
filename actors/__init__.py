"""agent-harness runtime: the supervisor, its actors, the session store and the tools."""
