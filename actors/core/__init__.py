"""The vocabulary every layer speaks: errors, messages, events, settings, ids, usage, planning,
the turn's cancellation and request/reply mailboxes. Nothing here does I/O or imports another
layer of the harness."""
