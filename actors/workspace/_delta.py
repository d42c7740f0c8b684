"""A file's new content kept as a delta against an earlier version of it.

A snapshot stores whole what it has not seen before; a file rewritten with a few lines
changed (an edit, a formatter, a rename across the project) would otherwise be stored whole
again, compressed, at every tool call. Here the new content is compressed with zlib using
the base (the earlier version) as its preset dictionary (``zdict``): what the two share
costs a back-reference, what changed costs its compressed bytes. zlib looks back at most
32 KB, so the content is cut into segments of :data:`SEGMENT` bytes, each compressed on its
own with the part of the base where it most likely came from as its dictionary: the
segment's first bytes are looked for in the base near the offset where the previous segment
was found (lines inserted or removed above shift the rest), and the window is taken around
that place (:data:`SLACK` bytes on each side). Raw deflate streams, so a segment costs no
header. What was not found is still compressed, only not against the base.

Encoded: for each segment where its dictionary starts in the base, its length (varints) and
its stream. Pure functions of the bytes (zlib and ``bytes.find`` run in C); no I/O.
"""

from __future__ import annotations

import zlib

SEGMENT = 8 * 1024
SLACK = 2 * 1024
WINDOW = SEGMENT + 2 * SLACK  # a segment's dictionary (zlib looks back 32 KB at most)
ANCHOR = 32  # the bytes of a segment looked for in the base
SEARCH = 64 * 1024  # how far from where it is expected
LEVEL = 9  # long back-references are most of a delta: worth the longer search


def _varint(n: int, out: bytearray) -> None:
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _read_varint(data: bytes, at: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        byte = data[at]
        at += 1
        n |= (byte & 0x7F) << shift
        if byte < 0x80:
            return n, at
        shift += 7


PROBES = 8  # anchors of the new content looked for in the base before a delta is tried


def similar(data: bytes, base: bytes) -> bool:
    """Whether a delta is worth trying: most of a few anchors spread over ``data`` are
    found in ``base`` (a file rewritten from scratch is not; ``bytes.find`` runs in C)."""
    if len(data) < ANCHOR * 2 or len(base) < ANCHOR:
        return False
    step = max((len(data) - ANCHOR) // PROBES, 1)
    starts = range(0, len(data) - ANCHOR + 1, step)
    found = sum(base.find(data[at : at + ANCHOR]) >= 0 for at in starts)
    return found * 2 >= len(starts)


def encode(data: bytes, base: bytes) -> bytes:
    """``data`` as a delta against ``base``."""
    out = bytearray()
    drift = 0  # where the last segment found was in the base, less where it is in data
    for start in range(0, len(data), SEGMENT):
        segment = data[start : start + SEGMENT]
        guess = start + drift
        if len(segment) >= ANCHOR:
            found = base.find(segment[:ANCHOR], max(0, guess - SEARCH), guess + SEARCH)
            if found >= 0:
                drift, guess = found - start, found
        low = max(0, guess - SLACK)
        packer = zlib.compressobj(LEVEL, zlib.DEFLATED, -15,
                                  zdict=base[low : low + WINDOW] or b"\0")
        stream = packer.compress(segment) + packer.flush()
        _varint(low, out)
        _varint(len(stream), out)
        out += stream
    return bytes(out)


def decode(delta: bytes, base: bytes) -> bytes:
    """The content :func:`encode` made ``delta`` of, given the same ``base``."""
    parts = []
    at = 0
    while at < len(delta):
        low, at = _read_varint(delta, at)
        length, at = _read_varint(delta, at)
        unpacker = zlib.decompressobj(-15, zdict=base[low : low + WINDOW] or b"\0")
        parts.append(unpacker.decompress(delta[at : at + length]) + unpacker.flush())
        at += length
    return b"".join(parts)
