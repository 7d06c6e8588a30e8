"""Identifiers that must not be guessable: correlation ids, pseudonyms, reply topics.

They come from the operating system's CSPRNG (:mod:`secrets`), never from a noise generator
(numpy's PCG64 outputs are predictable from earlier ones). Machines take an :data:`IdSource`
so that simulators can pass a deterministic one for reproducible runs.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Callable
from typing import TypeAlias

__all__ = ["IdSource", "counter_ids", "new_id"]

IdSource: TypeAlias = Callable[[], str]
"""A callable returning a fresh id of ``[0-9a-z]`` characters (a valid topic segment)."""


def new_id() -> str:
    """128 random bits as 32 hex digits."""
    return secrets.token_hex(16)


def counter_ids(prefix: str = "i") -> IdSource:
    """Deterministic ids ``{prefix}0, {prefix}1, ...`` for simulations and tests only."""
    counter = itertools.count()
    return lambda: f"{prefix}{next(counter)}"
