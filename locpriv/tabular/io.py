"""Atomic CSV / Parquet I/O of the batch core: a failed run leaves no output file."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pandas as pd

from locpriv.errors import ConfigError, DataError


def read_table(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read a CSV (``.csv``, ``.csv.gz``) or Parquet (``.parquet``, ``.pq``) file."""
    p = Path(path)
    name = p.name.lower()
    if not p.exists():
        raise DataError(f"input file {str(p)!r} does not exist")
    if name.endswith((".parquet", ".pq")):
        return pd.read_parquet(p)
    if name.endswith((".csv", ".csv.gz")):
        return pd.read_csv(p)
    raise ConfigError(f"unknown file type of {str(p)!r} (use .csv or .parquet)")


def write_table(df: pd.DataFrame, path: str | os.PathLike[str]) -> None:
    """Write atomically (temp file in the same directory, then ``os.replace``)."""
    p = Path(path)
    name = p.name.lower()
    if not name.endswith((".parquet", ".pq", ".csv", ".csv.gz")):
        raise ConfigError(f"unknown file type of {str(p)!r} (use .csv or .parquet)")
    fd, tmp = tempfile.mkstemp(dir=p.parent or ".", prefix=f".{p.name}.", suffix=".tmp")
    os.close(fd)
    try:
        if name.endswith((".parquet", ".pq")):
            df.to_parquet(tmp, index=False)
        else:
            df.to_csv(tmp, index=False, compression="gzip" if name.endswith(".gz") else None)
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text_atomic(text: str, path: str | os.PathLike[str]) -> None:
    """Write a text file atomically."""
    p = Path(path)
    fd, tmp = tempfile.mkstemp(dir=p.parent or ".", prefix=f".{p.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
