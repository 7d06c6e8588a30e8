"""One message as a broker delivers it: topic name and raw payload bytes (no I/O)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Received"]


@dataclass(frozen=True, slots=True)
class Received:
    """One message as received: topic name and raw payload bytes."""

    topic: str
    payload: bytes
