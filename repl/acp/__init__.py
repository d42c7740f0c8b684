"""The Agent Client Protocol front end (``harness --acp``): the harness as an editor's agent.

``serve.py`` runs it (stdio claimed, logs to stderr, signals, the shielded end);
``transport.py`` the checked JSON-RPC stream; ``agent.py`` the client's requests;
``session.py`` one session served (its supervisor, prompts, permissions); ``updates.py``
events and saved conversations as ``session/update`` payloads, prompts as messages;
``errors.py`` the harness's errors as JSON-RPC errors. Built on the official
``agent-client-protocol`` SDK (docs/decisions.md).
"""
