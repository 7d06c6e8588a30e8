"""Atomic CSV / Parquet I/O of the batch core: a failed run leaves no output file.

Parquet files are read and written row group by row group where it matters:
:func:`read_columns` reads only the columns the algorithm needs, and :func:`write_release`
streams the input's row groups to the output, replacing the released columns, so the other
columns of a large file are never all in memory, also when the rows are written in a random
order (two passes through temporary files, see :func:`write_release`).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
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
    """Write atomically (temp file in the same directory, then ``os.replace``). ``df.attrs``
    is never written: pandas would store it in the Parquet metadata, and a release's attrs hold
    its row permutation (``attrs["source_rows"]``), which would undo the shuffle."""
    p = Path(path)
    name = p.name.lower()
    if not name.endswith((*_PARQUET, ".csv", ".csv.gz")):
        raise ConfigError(f"unknown file type of {str(p)!r} (use .csv or .parquet)")
    df = df.copy(deep=False)
    df.attrs = {}
    with atomic_path(p) as tmp:
        if name.endswith(_PARQUET):
            df.to_parquet(tmp, index=False)
        else:
            df.to_csv(tmp, index=False, compression="gzip" if name.endswith(".gz") else None)


def write_text_atomic(text: str, path: str | os.PathLike[str]) -> None:
    """Write a text file atomically."""
    with atomic_path(path) as tmp:
        Path(tmp).write_text(text, encoding="utf-8")


def write_json(obj: Any, path: str | os.PathLike[str]) -> None:
    """Write ``obj`` atomically as indented JSON with sorted keys (numpy scalars as floats)."""
    write_text_atomic(json.dumps(obj, indent=2, sort_keys=True, default=float) + "\n", path)


def is_parquet(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` names a Parquet file (by its extension)."""
    return Path(path).name.lower().endswith(_PARQUET)


def parquet_columns(path: str | os.PathLike[str]) -> list[str]:
    """The column names of a Parquet file (from its schema; no data read)."""
    return list(pq.ParquetFile(path).schema_arrow.names)


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


def _release_part(
    pf: pq.ParquetFile, i: int, keep: list[str], released: pd.DataFrame, off: int
) -> pd.DataFrame:
    """Row group ``i`` of ``pf`` (columns ``keep``) with the released columns replaced."""
    part: pd.DataFrame = pf.read_row_group(i, columns=keep).to_pandas()  # categories survive
    rows = released.iloc[off : off + len(part)]
    for name in released.columns:
        part[name] = rows[name].reset_index(drop=True)
    return part


def write_release(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    released: pd.DataFrame,
    order: npt.NDArray[np.int64] | None = None,
    drop: Sequence[str] = (),
) -> None:
    """``dst`` = the Parquet file ``src`` with the columns of ``released`` (aligned with the
    input's rows) replaced, the columns ``drop`` removed and the rows in ``order``
    (``out[j] = in[order[j]]``; None keeps the input's order), written atomically.

    Streamed: memory holds one input row group (plus the permutation, 16 bytes a row). With an
    order, a first pass writes each input row group to a temporary file in the output's
    directory, its rows split by the output row group they go to (one row group of the
    temporary file each); a second pass builds each output row group from its pieces and puts
    them in order. Output row groups have the input's largest row-group size."""
    p = Path(dst)
    if not is_parquet(p):
        raise ConfigError(f"streamed output must be Parquet, got {str(p)!r}")
    pf = pq.ParquetFile(src)
    keep = [c for c in pf.schema_arrow.names if c not in set(drop)]
    with atomic_path(p) as tmp:
        writer: pq.ParquetWriter | None = None
        if order is None:
            off = 0
            for i in range(pf.num_row_groups):
                part = _release_part(pf, i, keep, released, off)
                off += len(part)
                schema = None if writer is None else writer.schema
                table = pa.Table.from_pandas(part, schema=schema, preserve_index=False)
                if writer is None:
                    writer = pq.ParquetWriter(tmp, table.schema)
                writer.write_table(table)
        else:
            writer = _write_permuted(
                pf, keep, released, np.asarray(order), tmp=tmp, workdir=p.parent
            )
        if writer is None:  # no row group: an empty file with the input's schema
            writer = pq.ParquetWriter(tmp, pa.schema([pf.schema_arrow.field(c) for c in keep]))
        writer.close()


_POS = "__locpriv_position__"


def _write_permuted(
    pf: pq.ParquetFile,
    keep: list[str],
    released: pd.DataFrame,
    order: npt.NDArray[np.int64],
    *,
    tmp: str | os.PathLike[str],
    workdir: Path,
) -> pq.ParquetWriter | None:
    """The two passes of :func:`write_release` with an order; returns the open writer."""
    n = pf.metadata.num_rows
    if order.shape != (n,):
        raise DataError(f"the row order has {order.size} entries for {n} rows")
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n, dtype=np.int64)  # output position of every input row
    size = max((pf.metadata.row_group(i).num_rows for i in range(pf.num_row_groups)), default=1)
    size = max(size, 1)
    writer: pq.ParquetWriter | None = None
    schema: pa.Schema | None = None
    with tempfile.TemporaryDirectory(prefix=".locpriv-shuffle-", dir=workdir) as work:
        pieces: list[tuple[Path, dict[int, int]]] = []  # per file: output group -> row group
        off = 0
        for i in range(pf.num_row_groups):
            part = _release_part(pf, i, keep, released, off)
            if len(part) == 0:
                continue
            where = pos[off : off + len(part)]
            off += len(part)
            table = pa.Table.from_pandas(part, schema=schema, preserve_index=False)
            schema = table.schema if schema is None else schema
            table = table.append_column(_POS, pa.array(where))
            bucket = where // size
            idx = np.argsort(bucket, kind="stable")
            bs, starts = np.unique(bucket[idx], return_index=True)
            ends = np.r_[starts[1:], idx.size]
            got: dict[int, int] = {}
            path = Path(work) / f"{i}.parquet"
            with pq.ParquetWriter(path, table.schema) as w:
                for j, (b, a, e) in enumerate(zip(bs, starts, ends, strict=True)):
                    w.write_table(table.take(pa.array(idx[a:e])))
                    got[int(b)] = j
            pieces.append((path, got))
        files = [(pq.ParquetFile(path), got) for path, got in pieces]
        for b in range(-(-n // size)):
            parts = [f.read_row_group(got[b]) for f, got in files if b in got]
            if not parts:
                continue
            chunk = pa.concat_tables(parts)
            chunk = chunk.take(pa.array(np.argsort(chunk.column(_POS).to_numpy())))
            chunk = chunk.drop_columns([_POS])
            if writer is None:
                writer = pq.ParquetWriter(tmp, chunk.schema)
            writer.write_table(chunk)
        for f, _ in files:
            f.close()
    return writer
