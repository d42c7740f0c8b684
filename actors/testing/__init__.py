"""Test doubles shipped as code: a scripted chat-completions server speaking the wire formats
of real endpoints. Tests and benchmarks import it like any module."""
