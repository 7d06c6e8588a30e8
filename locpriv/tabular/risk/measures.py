"""Classical disclosure-risk measures of a released table (pure functions over numpy arrays).

Every measure is a share in [0, 1] (a probability or a proportion of records).

**Re-identification risk from equivalence classes** (records with identical key values in the
written file). Definitions as ARX reports them (Prasser et al., "Putting statistical disclosure
control into practice: the ARX data anonymization tool", 2015; El Emam, *Guide to the
De-Identification of Personal Health Information*, 2013, ch. 14), with ``f_c`` the size of
class ``c`` in the release, ``F_c >= f_c`` its size in the population and ``n`` records:

* prosecutor (the attacker knows the target is in the release): record risk ``1/f_c``;
  ``prosecutor_max = max_c 1/f_c = 1/min f_c``; ``prosecutor_mean = (1/n) sum_r 1/f_c(r) =
  classes/n``; ``records_at_max_risk`` = share of records whose risk equals the maximum;
* journalist (the target is in a population the release is a sample of): record risk ``1/F_c``;
  ``journalist_max = 1/min F_c``, ``journalist_mean = (1/n) sum_r 1/F_c(r)``;
* marketer (the attacker re-identifies as many records as possible): the expected share of
  records re-identified, ``(1/n) sum_c f_c/F_c`` (= ``classes/n`` when the population is the
  release itself).

**Interval disclosure** of a numerical attribute (original ``x``, released ``x'``):

* rank-based (Domingo-Ferrer & Torra, "A quantitative comparison of disclosure control methods
  for microdata", 2001, sec. 3.2): the released values are ranked; around record r's released
  value the interval spans the released values whose rank differs from r's by less than ``p``
  percent of n; the measure is the share of records whose original value lies inside, averaged
  over p = 1..10 % (their "ID");
* sdcMicro's ``dRisk`` (SDID of Mateo-Sanz, Sebé & Domingo-Ferrer, PSD 2004), as sdcMicro
  computes it (``dRiskWORK``): ``[x'_j - k sd(x'_j), x'_j + k sd(x'_j)]`` per attribute (sample
  sd of the released column, ``k = 0.05``), and a record counts when at most one of its
  attributes falls outside its interval. ``interval_share_sd`` gives the per-attribute share
  inside the interval (the per-attribute SDID).

**Inference** of a confidential attribute: an attacker who knows a record's key values finds
its class and predicts the value most frequent there (``majority``) or the value of a random
member of the class (``random_member``, the nearest-record attack of anonymeter's inference
evaluator on a microaggregated release, whose class members are all nearest); the baseline is
the most frequent value of the whole file (no release needed).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

RANK_PERCENTS: tuple[int, ...] = tuple(range(1, 11))
"""The p (percent of n) over which the rank-based interval disclosure is averaged."""
SDCMICRO_K = 0.05
"""sdcMicro's ``dRisk`` default ``k`` (a share of the released column's standard deviation)."""


def class_sizes(labels: npt.ArrayLike) -> IntArray:
    """Per record, the size of its equivalence class (``labels`` = any integer class ids)."""
    lab = np.asarray(labels)
    _, inv, cnt = np.unique(lab, return_inverse=True, return_counts=True)
    out: IntArray = cnt[inv.ravel()].astype(np.int64)
    return out


def reidentification(
    labels: npt.ArrayLike, population_sizes: npt.ArrayLike | None = None
) -> dict[str, float]:
    """Prosecutor, journalist and marketer risk (module docstring).

    ``population_sizes``: per record, ``F_c`` of its class (the population class size; values
    below the release's own ``f_c`` are raised to it, since the release is part of its
    population). ``None``: the release is its own population (journalist = prosecutor).
    """
    f = class_sizes(labels).astype(np.float64)
    n = f.size
    if n == 0:
        raise ValueError("no records")
    big_f = f if population_sizes is None else np.maximum(np.asarray(population_sizes, float), f)
    r = 1.0 / f
    return {
        "prosecutor_max": float(r.max()),
        "prosecutor_mean": float(r.mean()),
        "records_at_max_risk": float(np.mean(r == r.max())),
        "journalist_max": float((1.0 / big_f).max()),
        "journalist_mean": float((1.0 / big_f).mean()),
        # sum_c f_c/F_c over classes = sum over records of 1/F_c(r)
        "marketer": float(np.sum(1.0 / big_f) / n),
        "classes": float(np.unique(np.asarray(labels)).size),
        "min_class_size": float(f.min()),
    }


def interval_disclosure_rank(
    original: npt.ArrayLike, released: npt.ArrayLike, percents: tuple[int, ...] = RANK_PERCENTS
) -> float:
    """Rank-based interval disclosure of one attribute (Domingo-Ferrer & Torra 2001), averaged
    over ``percents``. Record r's rank is its position in a stable sort of the released values;
    the interval holds the released values of ranks ``rank_r - h .. rank_r + h`` with ``h`` the
    largest integer below ``p n / 100`` (ranks differ by less than p % of n)."""
    x = np.asarray(original, dtype=np.float64)
    y = np.asarray(released, dtype=np.float64)
    n = x.size
    order = np.argsort(y, kind="stable")
    ys = y[order]
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    shares = []
    for p in percents:
        h = max(int(np.ceil(p * n / 100.0)) - 1, 0)
        lo = ys[np.maximum(rank - h, 0)]
        hi = ys[np.minimum(rank + h, n - 1)]
        shares.append(np.mean((x >= lo) & (x <= hi)))
    return float(np.mean(shares))


def interval_share_sd(
    original: npt.ArrayLike, released: npt.ArrayLike, k: float = SDCMICRO_K
) -> float:
    """Share of records whose original value lies in ``released ± k sd(released)`` (sample sd)."""
    x = np.asarray(original, dtype=np.float64)
    y = np.asarray(released, dtype=np.float64)
    sd = float(np.std(y, ddof=1)) if y.size > 1 else 0.0
    return float(np.mean(np.abs(x - y) <= k * sd))


def interval_disclosure_sdcmicro(
    original: npt.ArrayLike, released: npt.ArrayLike, k: float = SDCMICRO_K
) -> float:
    """sdcMicro's ``dRisk`` on n × d matrices: share of records with at most one attribute
    outside ``released ± k sd(released)`` (sdcMicro's ``rowSums(x < mi | x > ma) %in% 0:1``;
    with one attribute every record counts, as in sdcMicro)."""
    X = np.asarray(original, dtype=np.float64)
    Y = np.asarray(released, dtype=np.float64)
    if X.ndim == 1:
        X, Y = X[:, None], Y[:, None]
    sd = np.std(Y, axis=0, ddof=1) if Y.shape[0] > 1 else np.zeros(Y.shape[1])
    outside = np.sum(np.abs(X - Y) > k * sd, axis=1)
    return float(np.mean(outside <= 1))


def inference(labels: npt.ArrayLike, secret: npt.ArrayLike) -> dict[str, float]:
    """Inference of one confidential attribute from the key classes (module docstring).

    ``majority``: share of records whose value is their class's most frequent value;
    ``random_member``: expected share correct when predicting a random class member's value,
    ``(1/n) sum_c sum_v f_cv^2 / f_c``; ``baseline``: share of the most frequent value overall;
    ``gain = majority - baseline``; ``homogeneous_records``: share of records in a class with a
    single value (a homogeneity attack discloses them with certainty).
    """
    lab = np.unique(np.asarray(labels), return_inverse=True)[1].ravel()
    sec = np.unique(np.asarray(secret), return_inverse=True)[1].ravel()
    n = lab.size
    if n == 0:
        raise ValueError("no records")
    nv = int(sec.max()) + 1
    g = int(lab.max()) + 1
    table = np.bincount(lab * nv + sec, minlength=g * nv).reshape(g, nv).astype(np.float64)
    size = table.sum(axis=1)
    majority = float(table.max(axis=1).sum() / n)
    random_member = float(np.sum((table**2).sum(axis=1) / size) / n)
    baseline = float(np.bincount(sec).max() / n)
    distinct = (table > 0).sum(axis=1)
    homogeneous = float(size[distinct == 1].sum() / n)
    return {
        "majority": majority,
        "random_member": random_member,
        "baseline": baseline,
        "gain": majority - baseline,
        "homogeneous_records": homogeneous,
    }


def attribute_loss(original: npt.ArrayLike, released: npt.ArrayLike, kind: str) -> float:
    """Information loss of one key attribute on the written values, in percent.

    numerical / ordinal (on category ranks): ``100 sum (x - x')^2 / sum (x - mean x)^2`` (0 when
    the column is constant); nominal: the percentage of records whose released category differs
    from the original one.
    """
    if kind == "nominal":
        a = np.asarray(original, dtype=object)
        b = np.asarray(released, dtype=object)
        return float(100.0 * np.mean(a != b))
    x = np.asarray(original, dtype=np.float64)
    y = np.asarray(released, dtype=np.float64)
    total = float(np.sum((x - x.mean()) ** 2))
    return 0.0 if total == 0 else float(100.0 * np.sum((x - y) ** 2) / total)
