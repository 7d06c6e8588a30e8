"""ARX CSV hierarchy files (read, write, errors), the shipped Adult hierarchies and the
generated hierarchies (intervals, quantiles, dates, masking)."""

from __future__ import annotations

import datetime as dt
import fnmatch
import itertools
import re
import tomllib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from locpriv.errors import ConfigError, DataError
from locpriv.tabular.generalisation.arx import (
    format_hierarchy,
    hierarchy_rows,
    parse_hierarchy,
    read_hierarchy,
    require_covers,
    shipped_hierarchy_files,
    write_hierarchy,
)
from locpriv.tabular.generalisation.builders import (
    build_hierarchy,
    date_hierarchy,
    interval_hierarchy,
    masking_hierarchy,
    quantile_hierarchy,
)
from locpriv.tabular.generalisation.hierarchy import LevelHierarchy

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "locpriv" / "data" / "hierarchies" / "adult"
NOTEBOOK = REPO / "notebooks" / "data" / "adult_hierarchies"
ADULT = REPO.parent / "shared" / "data" / "adult.csv"
ARX_FILES = sorted(SHIPPED.glob("*.csv")) + sorted(NOTEBOOK.glob("*.csv"))


# ---------------------------------------------------------------- ARX files


def _same(a: LevelHierarchy, b: LevelHierarchy) -> bool:
    return a.labels == b.labels and all(
        np.array_equal(x, y) for x, y in zip(a.up, b.up, strict=True)
    )


@pytest.mark.parametrize("path", ARX_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_arx_file_round_trip_byte_for_byte(path: Path, tmp_path: Path) -> None:
    raw = path.read_bytes()
    h = read_hierarchy(path)
    rows = [tuple(line.split(";")) for line in raw.decode().splitlines()]
    assert hierarchy_rows(h) == rows  # same rows, same order
    out = tmp_path / path.name
    write_hierarchy(h, out)
    # ARX files end with a line break, except native-country.csv at ARX's head (none at all)
    assert out.read_bytes() == (raw if raw.endswith(b"\n") else raw + b"\n")
    assert _same(read_hierarchy(out), h)


def test_shipped_adult_hierarchies_listed_and_packaged() -> None:
    files = shipped_hierarchy_files("adult")
    assert set(files) == {
        "age",
        "education",
        "marital-status",
        "native-country",
        "occupation",
        "race",
        "salary-class",
        "sex",
        "workclass",
    }
    readme = (SHIPPED / "README.md").read_text()
    for name, path in files.items():
        assert f"`{path.name}`" in readme, name  # provenance row for every file
        read_hierarchy(path)
    # every shipped file is matched by pyproject's package-data, so it is in the wheel
    globs = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]["locpriv"]
    for path in [*files.values(), SHIPPED / "README.md"]:
        rel = path.relative_to(REPO / "locpriv").as_posix()
        assert any(fnmatch.fnmatch(rel, g) and rel.count("/") == g.count("/") for g in globs), rel
    with pytest.raises(ConfigError, match="adult"):
        shipped_hierarchy_files("../adult")
    with pytest.raises(ConfigError):
        shipped_hierarchy_files("nope")


@pytest.mark.skipif(not ADULT.exists(), reason="needs ../shared/data/adult.csv")
def test_shipped_hierarchies_cover_adult_values() -> None:
    import csv

    with ADULT.open() as fh:
        rows = list(csv.DictReader(fh))
    for col, name in [
        ("workclass", "workclass"),
        ("education", "education"),
        ("marital-status", "marital-status"),
        ("occupation", "occupation"),
        ("race", "race"),
        ("sex", "sex"),
        ("native-country", "native-country"),
        ("income", "salary-class"),
        ("age", "age"),
    ]:
        path = SHIPPED / f"{name}.csv"
        h = read_hierarchy(path)
        values = [r[col] for r in rows if r[col] != "?"]
        require_covers(h, values, source=str(path), column=col)
        if any(r[col] == "?" for r in rows):
            with pytest.raises(DataError, match=re.escape(path.name)):
                require_covers(h, [r[col] for r in rows], source=str(path), column=col)


def test_parse_tolerates_what_arx_files_carry() -> None:
    text = "\ufeffa;X;*;;\r\nb;X;*\r\n\r\nc;Y;*;\r\n"
    h = parse_hierarchy(text)
    assert hierarchy_rows(h) == [("a", "X", "*"), ("b", "X", "*"), ("c", "Y", "*")]
    assert _same(parse_hierarchy("a;X;*\rb;Y;*\r"), parse_hierarchy("a;X;*\nb;Y;*\n"))
    comma = parse_hierarchy("a,X,*\nb,X,*\n", delimiter=",")
    assert hierarchy_rows(comma) == [("a", "X", "*"), ("b", "X", "*")]


def test_quoting_as_arx_writes_it(tmp_path: Path) -> None:
    rows = [("a;1", 'say "hi"', "*"), ("line\nbreak", "plain", "*"), ("ü-€", "plain", "*")]
    h = LevelHierarchy.from_rows(rows)
    text = format_hierarchy(h)
    assert text == '"a;1";"say ""hi""";*\n"line\nbreak";plain;*\nü-€;plain;*\n'
    p = tmp_path / "q.csv"
    write_hierarchy(h, p)
    assert p.read_bytes() == text.encode("utf-8")
    assert hierarchy_rows(read_hierarchy(p)) == rows


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("a;X;*\nb;*\n", r"h\.csv:2: row has 2 cells.*line 1\) has 3"),
        ("a;X;*\nb;X;*\nc;;*\n", r"h\.csv:3: empty cell at level 1"),
        ("a;X;*\nb;X;*\na;Y;*\n", r"h\.csv:3: value 'a' already has a row at line 1"),
        (
            "a;X;P;*\nb;X;Q;*\n",
            r"h\.csv:2: node 'X' \(level 1\) has two parents: 'Q' here, 'P' at line 1",
        ),
        ("a;X;*\nb;Y;+\n", r"h\.csv: the last column must be one root, found 2"),
        ("a\nb\n", r"h\.csv: rows need a value and at least one level"),
        ("", r"h\.csv: the hierarchy file has no rows"),
        ('a;"X;*\n', r"h\.csv:\d+: not a CSV hierarchy row"),
        ("a;X;*\nb\x00;X;*\n", r"h\.csv:2: not a CSV hierarchy row"),
    ],
)
def test_malformed_files_name_file_and_line(tmp_path: Path, text: str, pattern: str) -> None:
    p = tmp_path / "h.csv"
    p.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=pattern):
        read_hierarchy(p)


def test_unreadable_files(tmp_path: Path) -> None:
    p = tmp_path / "latin.csv"
    p.write_bytes("a;X;*\nb\xe9;X;*\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=r"latin\.csv:2: not utf-8"):
        read_hierarchy(p)
    assert hierarchy_rows(read_hierarchy(p, encoding="latin-1"))[1] == ("bé", "X", "*")
    with pytest.raises(ConfigError, match="cannot read"):
        read_hierarchy(tmp_path / "absent.csv")
    with pytest.raises(ConfigError, match="separator"):
        parse_hierarchy("a;*", delimiter='"')


def test_missing_values_name_column_and_file() -> None:
    h = parse_hierarchy("a;X;*\nb;X;*\n")
    require_covers(h, ["a", "b", "a"], source="h.csv", column="col")
    with pytest.raises(DataError, match=r"column 'col': 2 value\(s\).*h\.csv.*\['\?', 'c'\]"):
        require_covers(h, ["a", "c", "?"], source="h.csv", column="col")


label = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=6)


@settings(max_examples=150, deadline=None)
@given(
    leaves=st.lists(label, min_size=1, max_size=12, unique=True),
    fan=st.lists(st.integers(0, 3), min_size=12, max_size=12),
    mid=st.lists(label, min_size=4, max_size=4, unique=True),
    root=label,
    sep=st.sampled_from([";", ",", "\t", "|"]),
)
def test_write_read_round_trip_any_labels(
    leaves: list[str],
    fan: list[int],
    mid: list[str],
    root: str,
    sep: str,
) -> None:
    rows = [(v, mid[fan[i]], root) for i, v in enumerate(leaves)]  # labels may repeat across levels
    h = LevelHierarchy.from_rows(rows)
    text = format_hierarchy(h, delimiter=sep)
    assert hierarchy_rows(parse_hierarchy(text, delimiter=sep)) == rows


# ---------------------------------------------------------------- generated hierarchies

INTERVAL = re.compile(r"^\[(-?[0-9.e+-]+), (-?[0-9.e+-]+)([)\]])$")


def _interval(lab: str) -> tuple[float, float, bool]:
    m = INTERVAL.match(lab)
    assert m, lab
    return float(m.group(1)), float(m.group(2)), m.group(3) == "]"


def _check_intervals(h: LevelHierarchy, values: list[float]) -> None:
    """Each value lies in its interval at every level; each interval lies in its parent's."""
    rows = hierarchy_rows(h)
    assert {r[0] for r in rows} == {str(v) for v in values}
    assert all(r[-1] == "*" for r in rows)
    by_leaf = {r[0]: r for r in rows}
    for v in values:
        r = by_leaf[str(v)]
        prev = None
        for lab in r[1:-1]:
            lo, hi, closed = _interval(lab)
            assert lo <= v and (v <= hi if closed else v < hi), (v, lab)
            if prev is not None:
                assert lo <= prev[0] and prev[1] <= hi, (prev, lab)
            prev = (lo, hi)
    for lev in range(1, len(h.labels) - 1):  # intervals of one level do not overlap
        spans = sorted(_interval(lab)[:2] for lab in h.labels[lev])
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))


DATASETS = {
    "ints": lambda r: r.integers(17, 91, 300).tolist(),
    "floats": lambda r: r.normal(0, 3.5, 200).round(3).tolist(),
    "skewed": lambda r: r.lognormal(8, 2, 200).round(1).tolist(),
    "negative": lambda r: (-r.integers(0, 10**6, 100)).tolist(),
    "tiny": lambda r: [0.001, 0.0015, 0.002],
    "one": lambda r: [42, 42, 42],
    "two": lambda r: [1, 100000],
}


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_interval_and_quantile_hierarchies_nest(name: str) -> None:
    values = DATASETS[name](np.random.default_rng(7))
    for h in (
        interval_hierarchy(values),
        quantile_hierarchy(values),
        quantile_hierarchy(values, bins=5),
    ):
        _check_intervals(h, values)
    h = interval_hierarchy(values)
    assert _same(h, interval_hierarchy(values)) and _same(
        quantile_hierarchy(values), quantile_hierarchy(values)
    )
    assert [lab[:1] for lab in h.labels[-1]] == ["*"]


def test_interval_hierarchy_labels_and_widths() -> None:
    h = interval_hierarchy([20, 25, 31, 47, 59], width=10)
    assert hierarchy_rows(h)[0] == ("20", "[20, 30)", "[20, 40)", "*")
    assert hierarchy_rows(h)[-1] == ("59", "[50, 60)", "[40, 60)", "*")
    ages = list(range(17, 91))
    h = interval_hierarchy(ages)  # range 73 / 32 = 2.28: the nice width above is 5
    lo, hi, _ = _interval(h.labels[1][0])
    assert (lo, hi) == (15, 20)
    assert h.height >= 5  # 32-ish base intervals doubled to the root
    with pytest.raises(ConfigError):
        interval_hierarchy([1, 2], width=0)
    with pytest.raises(DataError):
        interval_hierarchy(["a", "b"])
    with pytest.raises(DataError):
        interval_hierarchy([1.0, float("nan")])


def test_quantile_hierarchy_balances_records() -> None:
    values = np.random.default_rng(3).lognormal(0, 1.5, 4000).round(4).tolist()
    h = quantile_hierarchy(values, bins=8)
    codes = h.codes(values)
    base = np.bincount(h.ancestors()[1][codes])
    assert len(base) == 8 and base.min() > 0.8 * len(values) / 8


def test_date_hierarchy() -> None:
    h = date_hierarchy([dt.date(2024, 3, 5), dt.date(2019, 12, 31), "2024-03-07"])
    assert hierarchy_rows(h) == [
        ("2024-03-05", "2024-03", "2024", "2020s", "*"),
        ("2019-12-31", "2019-12", "2019", "2010s", "*"),
        ("2024-03-07", "2024-03", "2024", "2020s", "*"),
    ]
    arr = np.array(["2001-02-03T04:05", "1999-01-01T00:00"], dtype="datetime64[m]")
    h = build_hierarchy(arr)
    rows = hierarchy_rows(h)
    assert rows[0][1:] == ("2001-02-03", "2001-02", "2001", "2000s", "*")
    assert h.codes(arr.astype("datetime64[us]").tolist()).tolist() == [0, 1]
    with pytest.raises(DataError, match="not a date"):
        date_hierarchy(["2024-13-45"])


def test_masking_hierarchy() -> None:
    h = masking_hierarchy(["12345", "12399", "9", "12"])
    rows = {r[0]: r for r in hierarchy_rows(h)}
    assert rows["12345"] == ("12345", "1234*", "123**", "12***", "1****", "*****", "*")
    assert rows["12399"][1:3] == ("1239*", "123**")
    assert rows["12"] == ("12", "1*", "**", "**", "**", "**", "*")
    assert rows["9"][-1] == "*" and len(rows["9"]) == 7
    assert hierarchy_rows(masking_hierarchy(["a", "b"])) == [("a", "*"), ("b", "*")]
    # every label has one parent and masking only hides: the visible prefix stays the value's
    for r in rows.values():
        for lab in r[1:-1]:
            vis = lab.rstrip("*")
            assert r[0].startswith(vis) and len(lab) == len(r[0])


def test_build_hierarchy_chooses_by_type() -> None:
    assert build_hierarchy([1, 2.5, 40]).labels[1][0].startswith("[")
    assert build_hierarchy(np.array([3, 9, 27])).labels[1][0].startswith("[")
    assert build_hierarchy(["02139", "02142"]).labels[1] == ("0213*", "0214*")  # ZIP: masked
    assert build_hierarchy([dt.date(2020, 1, 1)]).labels[1] == ("2020-01",)
    assert build_hierarchy([True, False]).labels[0] == ("True", "False")  # not numbers
    assert build_hierarchy(["1", "22"], kind="quantile").labels[0] == ("1", "22")
    with pytest.raises(ConfigError, match="unknown hierarchy kind"):
        build_hierarchy([1], kind="fancy")
    with pytest.raises(DataError):
        build_hierarchy([])
