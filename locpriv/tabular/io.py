"""Atomic CSV / Parquet I/O of the batch core: a failed run leaves no output file.

Parquet files are read and written row group by row group where it matters:
:func:`read_columns` reads only the columns the algorithm needs, and :func:`write_release`
streams the input's row groups to the output, replacing the released columns, so the other
columns of a large file are never all in memory.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from locpriv.errors import ConfigError, DataError
from locpriv.files import atomic_path

_PARQUET = (".parquet", ".pq")


def read_table(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read a CSV (``.csv``, ``.csv.gz``) or Parquet (``.parquet``, ``.pq``) file."""
    p = Path(path)
    name = p.name.lower()
    if not p.exists():
        raise DataError(f"input file {str(p)!r} does not exist")
    if name.endswith(_PARQUET):
        return pd.read_parquet(p)
    if name.endswith((".csv", ".csv.gz")):
        return pd.read_csv(p)
    raise ConfigError(f"unknown file type of {str(p)!r} (use .csv or .parquet)")


def write_table(df: pd.DataFrame, path: str | os.PathLike[str]) -> None:
    """Write atomically (temp file in the same directory, then ``os.replace``)."""
    p = Path(path)
    name = p.name.lower()
    if not name.endswith((*_PARQUET, ".csv", ".csv.gz")):
        raise ConfigError(f"unknown file type of {str(p)!r} (use .csv or .parquet)")
    with atomic_path(p) as tmp:
        if name.endswith(_PARQUET):
            df.to_parquet(tmp, index=False)
        else:
            df.to_csv(tmp, index=False, compression="gzip" if name.endswith(".gz") else None)


def write_text_atomic(text: str, path: str | os.PathLike[str]) -> None:
    """Write a text file atomically."""
    with atomic_path(path) as tmp:
        Path(tmp).write_text(text, encoding="utf-8")


def is_parquet(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` names a Parquet file (by its extension)."""
    return Path(path).name.lower().endswith(_PARQUET)


def read_columns(path: str | os.PathLike[str], columns: Sequence[str]) -> pd.DataFrame:
    """Only ``columns`` of a Parquet file, read row group by row group (the other columns are
    never read). A missing column is a one-line DataError naming it."""
    p = Path(path)
    if not p.exists():
        raise DataError(f"input file {str(p)!r} does not exist")
    try:
        pf = pq.ParquetFile(p)
    except (OSError, pa.ArrowInvalid) as exc:
        raise DataError(f"input file {str(p)!r} is not a readable Parquet file: {exc}") from None
    names = set(pf.schema_arrow.names)
    for name in columns:
        if name not in names:
            raise DataError(f"column {name!r} not found in the input")
    cols = list(dict.fromkeys(columns))
    parts = [pf.read_row_group(i, columns=cols) for i in range(pf.num_row_groups)]
    table = pa.concat_tables(parts) if parts else pf.schema_arrow.empty_table().select(cols)
    df: pd.DataFrame = table.to_pandas()
    return df


def write_release(
    src: str | os.PathLike[str], dst: str | os.PathLike[str], released: pd.DataFrame
) -> None:
    """``dst`` = the Parquet file ``src`` with the columns of ``released`` (same rows, same
    order) replaced, written atomically and streamed row group by row group."""
    p = Path(dst)
    if not is_parquet(p):
        raise ConfigError(f"streamed output must be Parquet, got {str(p)!r}")
    pf = pq.ParquetFile(src)
    with atomic_path(p) as tmp:
        writer: pq.ParquetWriter | None = None
        off = 0
        for i in range(pf.num_row_groups):
            part = pf.read_row_group(i).to_pandas()  # pandas types (categories) survive
            rows = released.iloc[off : off + len(part)]
            off += len(part)
            for name in released.columns:
                part[name] = rows[name].reset_index(drop=True)
            schema = None if writer is None else writer.schema
            table = pa.Table.from_pandas(part, schema=schema, preserve_index=False)
            if writer is None:
                writer = pq.ParquetWriter(tmp, table.schema)
            writer.write_table(table)
        if writer is None:  # no row group: an empty file with the input's schema
            writer = pq.ParquetWriter(tmp, pf.schema_arrow)
        writer.close()
