"""Shared data of the generalisation tests: a synthetic people table, ARX-style hierarchy rows
(one row a value, from the original value to ``*``) for its key columns, their files and
``--hierarchy`` arguments, and random balanced hierarchies."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from locpriv.tabular.generalisation.hierarchy import LevelHierarchy

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


def write_inputs(
    tmp_path: Path, table: pd.DataFrame, rows: dict[str, list[tuple[str, ...]]]
) -> dict[str, Path]:
    """``table`` as ``in.csv`` (key ``"input"``) and each hierarchy as ``NAME.csv`` (``;``
    separated, ARX's format) under ``tmp_path``: their paths by name."""
    out = {"input": tmp_path / "in.csv"}
    table.to_csv(out["input"], index=False)
    for name, hierarchy in rows.items():
        path = tmp_path / f"{name}.csv"
        path.write_text("".join(";".join(r) + "\n" for r in hierarchy), encoding="utf-8")
        out[name] = path
    return out


def hierarchy_args(files: dict[str, Path], cols: Sequence[str]) -> list[str]:
    """``--hierarchy COL=PATH`` for each of ``cols``."""
    args = []
    for c in cols:
        args += ["--hierarchy", f"{c}={files[c]}"]
    return args


def random_hierarchy(rng: np.random.Generator, leaves: int, height: int) -> LevelHierarchy:
    """A balanced hierarchy of ``leaves`` values: each level groups the previous one's nodes at
    random, the last level is the root ``*``."""
    rows = [[f"v{i}"] for i in range(leaves)]
    current = list(range(leaves))
    for lev in range(1, height):
        groups = max(1, len(set(current)) // 2)
        mapping = {c: int(rng.integers(groups)) for c in sorted(set(current))}
        current = [mapping[c] for c in current]
        for row, c in zip(rows, current, strict=True):
            row.append(f"L{lev}_{c}")
    for row in rows:
        row.append("*")
    return LevelHierarchy.from_rows(rows)
