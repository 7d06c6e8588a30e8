"""Loss measures of generalised releases (locpriv.tabular.quality.loss), by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from locpriv.errors import ConfigError, DataError
from locpriv.tabular.generalisation.hierarchy import LevelHierarchy
from locpriv.tabular.generalisation.lattice import Lattice
from locpriv.tabular.models.spec import ModelCheck, PrivacyModels
from locpriv.tabular.quality import loss as lm

# a, b under X; c under Y; root *
ABC = LevelHierarchy.from_rows([("a", "X", "*"), ("b", "X", "*"), ("c", "Y", "*")])
SEX = LevelHierarchy.from_rows([("m", "*"), ("f", "*")])
HS = (ABC, SEX)
LEAVES = np.column_stack([ABC.codes(["a", "b", "c", "c"]), SEX.codes(["m", "m", "f", "f"])])


def _all(lat: Lattice, node: tuple[int, ...], k: int) -> dict[str, float]:
    rel = lat.release(node)
    out = {}
    for name in lm.LOSSES:
        from_release = lm.loss_of_release(name, rel, k, LEAVES, HS)
        assert lat.loss(node, name) == pytest.approx(from_release)  # both paths agree
        assert lat.lower_bound(node, name) <= from_release + 1e-12
        out[name] = from_release
    return out


def test_losses_by_hand_without_suppression() -> None:
    lat = Lattice(LEAVES, HS, ModelCheck(PrivacyModels(k=2)), 0)
    got = _all(lat, (1, 0), k=2)  # X X Y Y / m m f f: classes {0,1}, {2,3}
    assert got["prec"] == pytest.approx(0.25)  # column 0 at level 1 of 2, column 1 at 0
    assert got["gil"] == pytest.approx(1 / 8)  # X covers 2 of 3 leaves: 1/2; Y one leaf: 0
    assert got["dm"] == 8.0  # 2² + 2²
    assert got["cavg"] == 1.0  # 4 / (2 classes · k=2)
    assert got["entropy"] == pytest.approx(2.0)  # a|X and b|X: 1 bit each; c|Y: 0
    top = _all(lat, (2, 1), k=2)
    assert top["prec"] == 1.0 and top["gil"] == 1.0 and top["dm"] == 16.0
    assert top["cavg"] == 2.0
    # every cell at the root: sum of n·H per column = 4·1.5 + 4·1 bits
    assert top["entropy"] == pytest.approx(6.0 + 4.0)


def test_losses_by_hand_with_suppression() -> None:
    lat = Lattice(LEAVES, HS, ModelCheck(PrivacyModels(k=2)), 2)
    ev = lat.evaluate((0, 0))  # (a,m) and (b,m) are singletons: suppressed
    assert ev.acceptable and ev.suppressed == 2 and ev.labels.tolist() == [-1, -1, 0, 0]
    got = _all(lat, (0, 0), k=2)
    assert got["prec"] == 0.5 and got["gil"] == 0.5  # 4 of 8 cells fully lost
    assert got["dm"] == 4.0 + 2 * 4.0  # class of 2, two suppressed records at n = 4 each
    assert got["cavg"] == 1.0  # one class and the suppressed group: 4 / (2 · 2)
    assert got["entropy"] == pytest.approx(2 + 2 + 1 + 1)  # log2(4/1) twice, log2(4/2) twice
    rel = lat.release((0, 0))
    assert rel.values == (("*", "*", "c", "c"), ("*", "*", "f", "f"))
    assert rel.suppressed.tolist() == [True, True, False, False]


def test_loss_arguments() -> None:
    lat = Lattice(LEAVES, HS, ModelCheck(PrivacyModels(k=2)), 0)
    rel = lat.release((1, 1))
    with pytest.raises(ConfigError):
        lm.loss_name("precision")
    with pytest.raises(ConfigError):
        lm.loss_of_release("entropy", rel, 2)  # needs leaves and hierarchies
    with pytest.raises(ConfigError):
        lm.average_class_size_of([0, 0], 0)
    with pytest.raises(DataError):
        lm.non_uniform_entropy(rel, LEAVES[:2], HS)
    # entropy without release.levels resolves each value through the hierarchy
    bare = type(rel)(rel.columns, rel.values, rel.labels, rel.suppressed, rel.cover)
    assert lm.non_uniform_entropy(bare, LEAVES, HS) == pytest.approx(
        lm.non_uniform_entropy(rel, LEAVES, HS)
    )
    with pytest.raises(ConfigError):
        lm.precision_loss(bare)  # no depth: a release of intervals has no levels
    wrong = type(rel)(
        rel.columns, (("Y", "X", "X", "X"), rel.values[1]), rel.labels, rel.suppressed, rel.cover
    )
    with pytest.raises(DataError):
        lm.non_uniform_entropy(wrong, LEAVES, HS)


def test_entropy_matches_column_entropy_at_the_top() -> None:
    rng = np.random.default_rng(3)
    h = LevelHierarchy.from_rows([(str(i), str(i // 3), "*") for i in range(9)])
    leaves = rng.integers(0, 9, size=(200, 1))
    lat = Lattice(leaves, (h,), ModelCheck(PrivacyModels(k=1)), 0)
    p = np.bincount(leaves[:, 0]) / 200
    p = p[p > 0]
    assert lat.loss((2,), "entropy") == pytest.approx(-200 * float(np.sum(p * np.log2(p))))
    assert lat.loss((0,), "entropy") == 0.0 and lat.loss((0,), "dm") == pytest.approx(
        float(np.sum(np.bincount(leaves[:, 0]) ** 2))
    )
    assert math.isclose(lat.loss((0,), "prec"), 0.0)
