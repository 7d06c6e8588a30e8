"""ARX's CSV hierarchy files, read and written.

The format (as the ARX Data Anonymization Tool reads and writes it, ``CSVHierarchyInput`` /
``CSVSyntax``): UTF-8 text, one row per value of the attribute, ``value;level 1;...;root``,
separator ``;`` by default, quote ``"`` (a quote inside a quoted cell doubled), no header. Lines
may end in ``\\n``, ``\\r\\n`` or ``\\r``; a UTF-8 byte-order mark is skipped. Like ARX's own
files exported from spreadsheets, a row may carry *trailing* empty cells (``a;b;*;;``): they are
dropped. Blank lines are skipped. After that every row must have the same number of cells
(a balanced hierarchy: :class:`~locpriv.tabular.generalisation.hierarchy.LevelHierarchy`).

Public functions:

- :func:`read_hierarchy` ``(path, *, delimiter=";", encoding="utf-8") -> LevelHierarchy``
- :func:`parse_hierarchy` ``(text, *, source="<text>", delimiter=";") -> LevelHierarchy``
- :func:`write_hierarchy` ``(hierarchy, path, *, delimiter=";") -> None``
- :func:`format_hierarchy` ``(hierarchy, *, delimiter=";") -> str``
- :func:`hierarchy_rows` ``(hierarchy) -> list[tuple[str, ...]]`` (one row per leaf)
- :func:`require_covers` ``(hierarchy, values, *, source, column) -> None``
- :func:`shipped_hierarchy_files` ``(dataset="adult") -> dict[str, Path]``: the hierarchy files
  shipped in ``locpriv/data/hierarchies/<dataset>/`` by column name (provenance in its README)

Errors name the file and line: :class:`~locpriv.errors.ConfigError` for a malformed file
(ragged rows, an empty cell inside a row, a value in two rows, a node with two parents, two
roots), :class:`~locpriv.errors.DataError` for values of the data missing from the hierarchy.
Writing emits ``\\n`` line ends and quotes a cell only when it holds the separator, a quote or
a line break (what ARX writes), so reading a written file gives the same hierarchy and the
published ARX files are reproduced byte for byte.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from importlib import resources
from pathlib import Path

from locpriv.errors import ConfigError, DataError
from locpriv.tabular.generalisation.hierarchy import LevelHierarchy

__all__ = [
    "format_hierarchy",
    "hierarchy_rows",
    "parse_hierarchy",
    "read_hierarchy",
    "require_covers",
    "shipped_hierarchy_files",
    "write_hierarchy",
]


def _check_delimiter(delimiter: str) -> None:
    if len(delimiter) != 1 or delimiter in '"\r\n':
        raise ConfigError(
            "hierarchy separator must be one character other than a quote or line break, "
            f"got {delimiter!r}"
        )


def parse_hierarchy(text: str, *, source: str = "<text>", delimiter: str = ";") -> LevelHierarchy:
    """The hierarchy in ``text`` (the content of an ARX hierarchy file); ``source`` names it in
    errors."""
    _check_delimiter(delimiter)
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\x00" in text:  # binary, not a hierarchy
        line = text[: text.index("\x00")].count("\n") + 1
        raise ConfigError(f"{source}:{line}: not a CSV hierarchy row (NUL character)")
    reader = csv.reader(
        io.StringIO(text, newline=""),
        delimiter=delimiter,
        quotechar='"',
        doublequote=True,
        strict=True,
    )
    rows: list[tuple[str, ...]] = []
    lines: list[int] = []
    start = 1
    try:
        for raw in reader:
            cells = list(raw)
            while cells and cells[-1] == "":
                cells.pop()
            if cells:
                rows.append(tuple(cells))
                lines.append(start)
            start = reader.line_num + 1
    except csv.Error as exc:
        raise ConfigError(f"{source}:{reader.line_num}: not a CSV hierarchy row ({exc})") from exc
    return _build(rows, lines, source)


def _build(rows: list[tuple[str, ...]], lines: list[int], source: str) -> LevelHierarchy:
    if not rows:
        raise ConfigError(f"{source}: the hierarchy file has no rows")
    depth = len(rows[0])
    for row, line in zip(rows, lines, strict=True):
        if len(row) != depth:
            raise ConfigError(
                f"{source}:{line}: row has {len(row)} cells, the first row (line {lines[0]}) "
                f"has {depth}: every value needs the same number of levels"
            )
        if "" in row:
            raise ConfigError(f"{source}:{line}: empty cell at level {row.index('')}")
    if depth < 2:
        raise ConfigError(f"{source}: rows need a value and at least one level above it")
    seen: dict[str, int] = {}
    for row, line in zip(rows, lines, strict=True):
        if row[0] in seen:
            raise ConfigError(
                f"{source}:{line}: value {row[0]!r} already has a row at line {seen[row[0]]}"
            )
        seen[row[0]] = line
    for lev in range(1, depth - 1):
        parent: dict[str, tuple[str, int]] = {}
        for row, line in zip(rows, lines, strict=True):
            got = parent.setdefault(row[lev], (row[lev + 1], line))
            if got[0] != row[lev + 1]:
                raise ConfigError(
                    f"{source}:{line}: node {row[lev]!r} (level {lev}) has two parents: "
                    f"{row[lev + 1]!r} here, {got[0]!r} at line {got[1]}"
                )
    roots = dict.fromkeys(row[-1] for row in rows)
    if len(roots) != 1:
        raise ConfigError(
            f"{source}: the last column must be one root, found {len(roots)}: {list(roots)[:5]}"
        )
    return LevelHierarchy.from_rows(rows)


def read_hierarchy(
    path: str | Path, *, delimiter: str = ";", encoding: str = "utf-8"
) -> LevelHierarchy:
    """The hierarchy in the ARX CSV file ``path`` (see the module docstring for the format)."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read the hierarchy file ({exc.strerror})") from exc
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigError(f"{p}:{line}: not {encoding} text") from exc
    return parse_hierarchy(text, source=str(p), delimiter=delimiter)


def hierarchy_rows(hierarchy: LevelHierarchy) -> list[tuple[str, ...]]:
    """One row ``(value, level 1 node, ..., root)`` per leaf, in leaf order."""
    anc = hierarchy.ancestors()
    return [
        tuple(hierarchy.labels[lev][int(anc[lev, leaf])] for lev in range(len(hierarchy.labels)))
        for leaf in range(len(hierarchy.labels[0]))
    ]


def _cell(text: str, delimiter: str) -> str:
    if text == "":
        raise ConfigError("a hierarchy label is empty: ARX files cannot hold one")
    if any(c in text for c in (delimiter, '"', "\r", "\n")):
        return '"' + text.replace('"', '""') + '"'
    return text


def format_hierarchy(hierarchy: LevelHierarchy, *, delimiter: str = ";") -> str:
    """The ARX CSV text of ``hierarchy`` (``\\n`` line ends; a cell is quoted only when it
    holds the separator, a quote or a line break, quotes inside doubled)."""
    _check_delimiter(delimiter)
    return "".join(
        delimiter.join(_cell(c, delimiter) for c in row) + "\n" for row in hierarchy_rows(hierarchy)
    )


def write_hierarchy(hierarchy: LevelHierarchy, path: str | Path, *, delimiter: str = ";") -> None:
    """Write ``hierarchy`` to ``path`` as an ARX CSV hierarchy file (UTF-8)."""
    Path(path).write_bytes(format_hierarchy(hierarchy, delimiter=delimiter).encode("utf-8"))


def require_covers(
    hierarchy: LevelHierarchy, values: Iterable[object], *, source: str, column: str
) -> None:
    """``DataError`` naming the column, the hierarchy file and (up to 5 of) the values of the
    data that have no row in it (values compared as strings, as :meth:`LevelHierarchy.codes`)."""
    known = set(hierarchy.labels[0])
    missing = sorted({str(v) for v in values} - known)
    if missing:
        raise DataError(
            f"column {column!r}: {len(missing)} value(s) have no row in the hierarchy "
            f"{source}: {missing[:5]}"
        )


def shipped_hierarchy_files(dataset: str = "adult") -> dict[str, Path]:
    """Column name -> path of each hierarchy file shipped for ``dataset`` (sorted by name)."""
    root = Path(str(resources.files("locpriv"))) / "data" / "hierarchies"
    folder = root / dataset
    if not dataset.replace("-", "").replace("_", "").isalnum() or not folder.is_dir():
        known = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
        raise ConfigError(f"no shipped hierarchies for {dataset!r} (shipped: {known})")
    return {p.stem: p for p in sorted(folder.glob("*.csv"))}
