"""The characters a terminal acts on rather than shows.

One definition for the two places that deal with them: titles are stored without them
(:func:`actors.core.previews.clean_title`), and the front end shows them as visible stand-ins
wherever it writes to a terminal, or as JSON escapes in JSON (repl/interactive/sanitize.py).
Imports nothing: the REPL's first prompt uses it before anything else is loaded.
"""

TERMINAL_CONTROLS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069"
"""A regular expression's character class: the C0 controls but newline and tab, DEL, the C1
controls (``\\x9b`` is a CSI on some terminals), and the bidirectional embeddings,
overrides and isolates (U+202A..U+202E, U+2066..U+2069), which reorder what is shown."""
