"""Shared data of the generalisation CLI tests: a synthetic people table and ARX-style
hierarchy rows (one row a value, from the original value to ``*``) for its key columns."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

CITIES = ["Lyon", "Paris", "Rome", "Milan", "Lima", "Quito"]
SEX_ROWS: list[tuple[str, ...]] = [("F", "*"), ("M", "*")]
CITY_ROWS: list[tuple[str, ...]] = [
    ("Lyon", "France", "Europe", "*"),
    ("Paris", "France", "Europe", "*"),
    ("Rome", "Italy", "Europe", "*"),
    ("Milan", "Italy", "Europe", "*"),
    ("Lima", "Peru", "America", "*"),
    ("Quito", "Ecuador", "America", "*"),
]


def age_rows(widths: Sequence[int]) -> list[tuple[str, ...]]:
    """Ages 15..94, each generalised to bands of ``widths`` years (``"20-24"``), then ``*``."""
    return [
        (str(a), *(f"{a // w * w}-{a // w * w + w - 1}" for w in widths), "*")
        for a in range(15, 95)
    ]


def hierarchies(age_widths: Sequence[int]) -> dict[str, list[tuple[str, ...]]]:
    """The rows of the ``age``, ``sex`` and ``city`` hierarchies."""
    return {"age": age_rows(age_widths), "sex": SEX_ROWS, "city": CITY_ROWS}


def people(n: int = 400, seed: int = 7) -> pd.DataFrame:
    """``n`` random records: id, age (18..89), sex, city, disease, hours (10..59)."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "id": np.arange(n),
            "age": rng.integers(18, 90, n),
            "sex": rng.choice(["F", "M"], n),
            "city": rng.choice(CITIES, n),
            "disease": rng.choice(["flu", "hiv", "cold", "cancer", "none"], n),
            "hours": rng.integers(10, 60, n),
        }
    )
