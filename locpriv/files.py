"""Atomic file replacement, shared by the batch core's outputs and the services' journal."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["atomic_path"]


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str], *, fsync: bool = False) -> Iterator[str]:
    """A temporary path beside ``path`` to write; on leaving the block without an error it
    replaces ``path`` in one ``os.replace`` (after an ``fsync`` if asked), on an error it is
    removed. Readers see the old file or the new one, never a partial one."""
    p = Path(path)
    fd, tmp = tempfile.mkstemp(dir=p.parent or ".", prefix=f".{p.name}.", suffix=".tmp")
    os.close(fd)
    try:
        yield tmp
        if fsync:
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
