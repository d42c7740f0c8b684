"""What a snapshot is made of: content-addressed blobs and trees.

A *blob* is a file's bytes (or a symlink's target text); a *tree* is one directory's sorted
entries. Each object is named by the SHA-256 of its kind and content, cut to 160 bits (its
*oid*: as long as git's, 80 bits of collision resistance), so equal content is stored
once, across snapshots, sessions and projects, and a snapshot is named by its root tree:
two snapshots of the same files are the same snapshot.

An entry is ``(name, kind, oid, size, mode)``: ``mode`` is the permission bits (``0o777`` at
most: never setuid, setgid or sticky) of a file or a directory, 0 for a link, a kept-out
entry, or an entry of a tree written before modes were kept (a restore then keeps the
executable bit only, as it did). Kinds::

    f  a regular file            (oid: its blob, size: its bytes)
    x  an executable file        (as f, with an executable bit)
    l  a symbolic link           (oid: the blob of its target text; never followed)
    d  a directory               (oid: its tree, size: the files below it)
    o  a file kept out           (too big for the size caps; oid zero, size: its bytes)
    u  a directory not looked at (over the entry or depth caps; oid zero)

Kept-out entries let a restore tell "not there" from "there, but not kept": it never deletes
or overwrites what a snapshot did not keep, nor anything below a directory it did not look
at (see :func:`actors.workspace._diff.diff`). Names are bytes on disk; here they are ``str``
with ``surrogateescape`` (as ``os`` gives them), encoded back for hashing and sorting.

Pure functions; no I/O.
"""

from __future__ import annotations

import hashlib
import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

FILE, EXEC, LINK, DIR, OMITTED, UNSCANNED = "f", "x", "l", "d", "o", "u"
CONTENT_KINDS = frozenset((FILE, EXEC, LINK))
KEPT_OUT = frozenset((OMITTED, UNSCANNED))
OID_BYTES = 20
ZERO = bytes(OID_BYTES)
BLOB, TREE = 0, 1

# An entry on disk: kind (1 byte), oid, size, mode and name length as varints, name, after a
# tree's first byte ``MODES``; a tree without it is of the first format (no mode). Trees are
# most of what a snapshot of a deep project adds, so they are kept small. The empty tree has
# no entries and no marker (its oid is the same in both formats).
_HEAD = struct.Struct(f">c{OID_BYTES}s")
MODES = b"\x00"  # no kind letter is a NUL: the first format cannot start with it
PERMISSIONS = 0o777  # what a mode keeps of st_mode


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _read_varint(data: bytes, at: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        byte = data[at]
        at += 1
        n |= (byte & 0x7F) << shift
        if byte < 0x80:
            return n, at
        shift += 7


@dataclass(frozen=True, slots=True)
class Entry:
    name: str
    kind: str
    oid: bytes
    size: int
    mode: int = 0  # permission bits (0: not kept; see the module doc)

    @property
    def is_content(self) -> bool:
        """A file or link whose bytes the snapshot kept."""
        return self.kind in CONTENT_KINDS


def blob_oid(data: bytes) -> bytes:
    digest = hashlib.sha256(b"blob %d\0" % len(data))
    digest.update(data)
    return digest.digest()[:OID_BYTES]


def encode_tree(entries: Iterable[Entry]) -> bytes:
    parts = [MODES]
    for entry in sorted(entries, key=lambda e: os.fsencode(e.name)):
        name = os.fsencode(entry.name)
        parts.append(_HEAD.pack(entry.kind.encode(), entry.oid))
        parts.append(_varint(entry.size))
        parts.append(_varint(entry.mode & PERMISSIONS))
        parts.append(_varint(len(name)))
        parts.append(name)
    return b"".join(parts) if len(parts) > 1 else b""


def decode_tree(data: bytes) -> list[Entry]:
    """The entries of a tree of either format (see ``MODES``)."""
    entries = []
    modes = data[:1] == MODES
    at = 1 if modes else 0
    size = _HEAD.size
    mode = 0
    while at < len(data):
        kind, oid = _HEAD.unpack_from(data, at)
        length, at = _read_varint(data, at + size)
        if modes:
            mode, at = _read_varint(data, at)
        name_len, at = _read_varint(data, at)
        entries.append(Entry(os.fsdecode(data[at : at + name_len]), kind.decode(), oid, length,
                             mode))
        at += name_len
    return entries


def tree_oid(encoded: bytes) -> bytes:
    digest = hashlib.sha256(b"tree %d\0" % len(encoded))
    digest.update(encoded)
    return digest.digest()[:OID_BYTES]


EMPTY_TREE = tree_oid(b"")


def short(oid: bytes) -> str:
    """The snapshot id people see: the first 12 hex digits of its root tree."""
    return oid.hex()[:12]


Status = Literal["added", "deleted", "modified"]

@dataclass(frozen=True)
class Change:
    """One path that differs: ``old`` and ``new`` entries (None: not there)."""

    path: str
    old: Entry | None
    new: Entry | None

    @property
    def status(self) -> Status:
        if self.old is None:
            return "added"
        if self.new is None:
            return "deleted"
        return "modified"

    @property
    def is_dir(self) -> bool:
        """A directory appearing or going away (its files are changes of their own)."""
        side = self.new if self.new is not None else self.old
        return side is not None and side.kind == DIR

    @property
    def kept_out(self) -> bool:
        """Either side is an entry the snapshot did not keep the content of."""
        return any(e is not None and e.kind in KEPT_OUT for e in (self.old, self.new))

    @property
    def unobserved(self) -> bool:
        """Either side is a directory the snapshot did not look in: what is below it (and
        whether it is still there) is not known."""
        return any(e is not None and e.kind == UNSCANNED for e in (self.old, self.new))
