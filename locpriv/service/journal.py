"""A small on-disk journal of the requests a service holds that nobody else will answer.

The anonymizer keeps pending temporal cloaks in memory only. If it crashes, their users would
wait for a reply that never comes. The driver therefore saves ``(reply_to, correlation_id)``
of every such request (never a position or a user id) to this file whenever the set changes,
at most once per watchdog period; the next run answers each of them ``unavailable`` at start
and clears the file. Writes are atomic (a temporary file renamed over the old one), so a crash
leaves either the old or the new list; a crash loses at most the changes of the last period.
"""

from __future__ import annotations

import contextlib
import json
import logging
from pathlib import Path

from locpriv.files import atomic_path

__all__ = ["Journal"]

log = logging.getLogger(__name__)

MAX_ENTRIES = 1_000_000
"""Entries read back at most (a corrupt or hostile file cannot exhaust memory)."""


class Journal:
    """``(reply_to, correlation_id)`` pairs persisted in one JSON file at ``path``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def save(self, entries: list[tuple[str, str]]) -> None:
        """Replace the journal's content by ``entries`` atomically (raises OSError)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = json.dumps([[r, c] for r, c in entries], separators=(",", ":"))
        with atomic_path(self.path, fsync=True) as tmp:
            Path(tmp).write_text(data, encoding="utf-8")

    def load(self) -> list[tuple[str, str]]:
        """The saved entries; a missing, unreadable or corrupt file gives none (logged)."""
        try:
            raw = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        except OSError as exc:
            log.error("cannot read journal %s: %s", self.path, exc)
            return []
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError):
            log.error("journal %s is corrupt; ignored", self.path)
            return []
        if not isinstance(data, list):
            return []
        return [
            (e[0], e[1])
            for e in data[:MAX_ENTRIES]
            if isinstance(e, list) and len(e) == 2 and all(isinstance(x, str) for x in e)
        ]

    def clear(self) -> None:
        """Remove the journal file (no error when it is absent)."""
        with contextlib.suppress(OSError):
            self.path.unlink()
