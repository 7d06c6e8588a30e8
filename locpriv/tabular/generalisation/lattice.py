"""The full-domain generalisation lattice of a set of hierarchies, and the evaluation of its nodes.

A *node* holds one level per key attribute (0 = original values, ``height`` = the root); the
lattice is ordered coordinate-wise (a node's *generalisations* are the nodes above it in every
coordinate). Evaluating a node (global recoding, Samarati's model AG TS):

1. every record's key is recoded to the ancestors at the node's levels; records with equal
   recoded keys form the equivalence classes;
2. classes failing the privacy models (:meth:`ModelCheck.classes_ok`) are suppressed (tuple
   suppression: every key value released as ``"*"``);
3. the node is *acceptable* iff the suppressed records number at most MaxSup.

Monotonicity (what predictive tagging may use): when a class that passes k-anonymity or distinct
l-diversity is merged with other records, it still passes, so going up the lattice never
suppresses more records: acceptable nodes are closed upwards, unacceptable ones downwards. With
MaxSup = 0 the same holds for entropy and recursive l-diversity and t-closeness (a union of
passing classes passes: Machanavajjhala et al. 2007, Li et al. 2007). Entropy/recursive
l-diversity and t-closeness *with* suppression are not monotone (adding records can break a
passing class), and :attr:`Lattice.monotone` is then False: every node is checked.

Public API::

    Lattice(leaves, hierarchies, check, max_suppression, *, monotone=None, columns=None)
    lattice.evaluate(node) -> NodeEval; lattice.acceptable(node) -> bool
    lattice.loss(node, name) -> float; lattice.lower_bound(node, name) -> float
    lattice.release(node) -> GeneralisedRelease
    max_suppressed(max_suppression, n) -> int

``leaves``: n × q leaf codes (:meth:`LevelHierarchy.codes`), ``hierarchies``: q
:class:`LevelHierarchy`, ``check``: a :class:`ModelCheck` on the same n records,
``max_suppression``: an ``int`` count of records or a ``float`` share of n in [0, 1].

A release's rows are aligned with the input rows (record i is row i), so that ``labels`` and
the loss measures can refer to the originals; whoever writes it must write the rows in a random
order (an order kept links two releases of one table: Wiegand & Schallner's unsorted matching
attack), as :mod:`locpriv.tabular.io.frame` does for every method.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from locpriv.errors import ConfigError, DataError, InfeasibleError
from locpriv.tabular.generalisation._kernels.classes import dense_rows
from locpriv.tabular.generalisation.hierarchy import LevelHierarchy
from locpriv.tabular.generalisation.release import GeneralisedRelease
from locpriv.tabular.models.spec import ModelCheck, PrivacyModels
from locpriv.tabular.quality import loss as lm

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
Node = tuple[int, ...]

_UNKNOWN, _OK, _FAIL = 0, 1, -1
MAX_NODES = 2_000_000
"""Largest lattice a search accepts (``ConfigError`` above it): its nodes and statuses are held
in memory (q + 1 ints each)."""


def max_suppressed(max_suppression: int | float, n: int) -> int:
    """MaxSup as a count: an ``int`` is a number of records (>= 0), a ``float`` a share of ``n``
    in [0, 1] (rounded down)."""
    if isinstance(max_suppression, bool):
        raise ConfigError("max_suppression must be a count (int) or a share of n (float)")
    if isinstance(max_suppression, int | np.integer):
        if max_suppression < 0:
            raise ConfigError(f"max_suppression must be >= 0, got {max_suppression}")
        return int(max_suppression)
    share = float(max_suppression)
    if not 0.0 <= share <= 1.0:
        raise ConfigError(f"a max_suppression share must lie in [0, 1], got {share}")
    return int(np.floor(share * n + 1e-9))


def models_monotone(models: PrivacyModels, max_sup: int) -> bool:
    """Whether acceptability is monotone in the lattice for ``models`` with MaxSup ``max_sup``
    (see the module docstring)."""
    only_k_l = models.entropy_l <= 1 and models.recursive is None and models.t is None
    return only_k_l or max_sup == 0


@dataclass(frozen=True)
class NodeEval:
    """A node's evaluation. Invariants: ``labels[i] == -1`` iff record i is suppressed; kept
    classes are ``0..classes-1``, each passing the models; ``acceptable == (suppressed <=
    MaxSup)``."""

    node: Node
    labels: IntArray
    suppressed: int
    classes: int
    acceptable: bool


class Lattice:
    """Generalisation lattice of ``hierarchies`` over ``leaves``, judged by ``check``.

    ``monotone``: whether predictive tagging may be used (default: :func:`models_monotone`;
    pass False to force a check of every node). Statuses and losses are cached per node.
    """

    def __init__(
        self,
        leaves: npt.ArrayLike,
        hierarchies: Sequence[LevelHierarchy],
        check: ModelCheck,
        max_suppression: int | float,
        *,
        monotone: bool | None = None,
        columns: Sequence[str] | None = None,
    ) -> None:
        lv = np.asarray(leaves, dtype=np.int64)
        if lv.ndim != 2 or lv.shape[1] != len(hierarchies) or lv.shape[1] == 0:
            raise DataError("leaves must be n × q with one hierarchy per column (q >= 1)")
        self.n, self.q = int(lv.shape[0]), int(lv.shape[1])
        if self.n == 0:
            raise DataError("no records")
        for j, h in enumerate(hierarchies):
            if lv[:, j].min() < 0 or lv[:, j].max() >= len(h.labels[0]):
                raise DataError(f"column {j}: leaf codes outside the hierarchy")
        if check.S.shape[0] not in (0, self.n):
            raise DataError("the model check holds another number of records")
        self.leaves = lv
        self.hierarchies = tuple(hierarchies)
        self.check = check
        self.columns = (
            tuple(columns) if columns is not None else tuple(f"q{j}" for j in range(self.q))
        )
        if len(self.columns) != self.q:
            raise ConfigError("one column name per key attribute")
        self.max_sup = max_suppressed(max_suppression, self.n)
        self.monotone = (
            models_monotone(check.models, self.max_sup) if monotone is None else monotone
        )
        self.heights: Node = tuple(h.height for h in hierarchies)
        self.top: Node = self.heights
        self.radix = np.asarray([hh + 1 for hh in self.heights], dtype=np.int64)
        size = int(np.prod(self.radix))
        if size > MAX_NODES:
            raise ConfigError(
                f"the generalisation lattice has {size} nodes, above {MAX_NODES}: use fewer key "
                "attributes or shorter hierarchies (or a multidimensional method)"
            )
        self.nodes: IntArray = np.asarray(
            list(itertools.product(*(range(hh + 1) for hh in self.heights))), dtype=np.int64
        ).reshape(-1, self.q)
        self.node_heights: IntArray = self.nodes.sum(axis=1)
        self.status = np.zeros(len(self.nodes), dtype=np.int8)
        self.evaluations = 0
        self.tagged = 0
        self._losses: dict[tuple[Node, str], float] = {}
        self._last: NodeEval | None = None
        uniq, inv = np.unique(lv, axis=0, return_inverse=True)
        self._inv = np.asarray(inv, dtype=np.int64).reshape(-1)
        self._anc = [h.ancestors() for h in hierarchies]  # level × leaves
        self._anc_u = [a[:, uniq[:, j]] for j, a in enumerate(self._anc)]  # level × unique rows
        self._prepare_losses()

    # --- nodes ----------------------------------------------------------------------------

    def index(self, node: Node) -> int:
        """Position of ``node`` in :attr:`nodes` (mixed radix)."""
        out = 0
        for lev, r in zip(node, self.radix, strict=True):
            out = out * int(r) + lev
        return out

    @property
    def size(self) -> int:
        """Number of nodes."""
        return len(self.nodes)

    def nodes_at(self, height: int) -> list[Node]:
        """Nodes whose levels sum to ``height``, in lexicographic order."""
        rows = self.nodes[self.node_heights == height]
        return [tuple(int(x) for x in r) for r in rows]

    # --- evaluation -----------------------------------------------------------------------

    def evaluate(self, node: Node) -> NodeEval:
        """Classes, suppression and acceptability of ``node`` (always computed; the last one is
        kept)."""
        if self._last is not None and self._last.node == node:
            return self._last
        if len(node) != self.q or any(
            not 0 <= a <= b for a, b in zip(node, self.heights, strict=True)
        ):
            raise ConfigError(f"{node} is not a node of this lattice")
        codes = np.empty((self._anc_u[0].shape[1], self.q), dtype=np.int64)
        for j, lev in enumerate(node):
            codes[:, j] = self._anc_u[j][lev]
        cls_u, _ = dense_rows(codes)
        lab = cls_u[self._inv]
        ok = np.asarray(self.check.classes_ok(lab), dtype=bool)
        kept = ok[lab]
        new_id = np.where(ok, np.cumsum(ok) - 1, -1).astype(np.int64)
        labels = new_id[lab]
        suppressed = self.n - int(kept.sum())
        self.evaluations += 1
        ev = NodeEval(
            node=node,
            labels=labels,
            suppressed=suppressed,
            classes=int(ok.sum()),
            acceptable=suppressed <= self.max_sup,
        )
        self._last = ev
        self.status[self.index(node)] = _OK if ev.acceptable else _FAIL
        return ev

    def known(self, node: Node) -> bool | None:
        """The node's acceptability if checked or tagged, else None."""
        s = int(self.status[self.index(node)])
        return None if s == _UNKNOWN else s == _OK

    def acceptable(self, node: Node) -> bool:
        """Whether ``node`` is acceptable: from a tag or a check (then tagging its
        generalisations or specialisations when :attr:`monotone`)."""
        got = self.known(node)
        if got is not None:
            return got
        ok = self.evaluate(node).acceptable
        if self.monotone:
            arr = np.asarray(node, dtype=np.int64)
            idx = np.flatnonzero(self.status == _UNKNOWN)
            sub = self.nodes[idx]
            hit = idx[(sub >= arr).all(axis=1) if ok else (sub <= arr).all(axis=1)]
            self.tagged += len(hit)
            self.status[hit] = _OK if ok else _FAIL
        return ok

    def require_top(self) -> None:
        """``InfeasibleError`` when no node is acceptable. With :attr:`monotone` models the top
        node (every key at its root) decides; otherwise a lower node may be acceptable while
        the top is not (the top's one class fails entropy/recursive l-diversity, and more
        records than MaxSup would be suppressed, but finer classes pass with fewer suppressed),
        so every node is checked before giving up."""
        if not self.acceptable(self.top) and (
            self.monotone or not any(self.acceptable(nd) for nd in self._all_nodes())
        ):
            ev = self.evaluate(self.top)
            m = self.check.models
            bad = self.check.violations(np.arange(self.n)) if self.check.S.size else ["k"]
            field = bad[0] if bad else "k"
            value = {
                "k": m.k,
                "l": m.l,
                "entropy_l": m.entropy_l,
                "recursive": m.recursive,
                "t": m.t,
            }[field]
            raise InfeasibleError(
                f"no full-domain generalisation meets {field}={value!r} (field {field}): even "
                f"with every key attribute at its root, {ev.suppressed} of {self.n} records "
                f"would be suppressed, above MaxSup = {self.max_sup}"
                + ("" if self.monotone else ", and no other node is acceptable")
            )

    def _all_nodes(self) -> list[Node]:
        return [tuple(int(x) for x in row) for row in self.nodes]

    def classify(self) -> None:
        """Acceptability of every node. With :attr:`monotone`, by binary searches along chains
        of unknown nodes (a check tags the whole up- or down-set); otherwise node by node."""
        while True:
            unknown = np.flatnonzero(self.status == _UNKNOWN)
            if len(unknown) == 0:
                return
            if not self.monotone:
                for i in unknown:
                    self.acceptable(tuple(int(x) for x in self.nodes[i]))
                return
            heights = self.node_heights[unknown]
            cur: Node = tuple(int(x) for x in self.nodes[unknown[int(np.argmin(heights))]])
            chain = [cur]
            while True:
                nxt = None
                for j in range(self.q):
                    if cur[j] < self.heights[j]:
                        cand = (*cur[:j], cur[j] + 1, *cur[j + 1 :])
                        if self.known(cand) is None:
                            nxt = cand
                            break
                if nxt is None:
                    break
                chain.append(nxt)
                cur = nxt
            lo, hi = 0, len(chain) - 1
            while lo <= hi:
                mid = (lo + hi) // 2
                if self.acceptable(chain[mid]):
                    hi = mid - 1
                else:
                    lo = mid + 1

    def minimal_acceptable(self) -> list[Node]:
        """Acceptable nodes none of whose direct specialisations is acceptable (after
        :meth:`classify`)."""
        self.classify()
        out: list[Node] = []
        for row in self.nodes[self.status == _OK]:
            node = tuple(int(x) for x in row)
            below = ((*node[:j], node[j] - 1, *node[j + 1 :]) for j in range(self.q) if node[j] > 0)
            if not any(self.known(b) for b in below):
                out.append(node)
        return out

    # --- losses ---------------------------------------------------------------------------

    def _prepare_losses(self) -> None:
        lv, n = self.leaves, self.n
        self._value_count = np.empty((n, self.q))
        self._cover_leaf: list[list[FloatArray]] = []  # column -> level -> cover per leaf
        self._set_leaf: list[list[FloatArray]] = []  # column -> level -> set count per leaf
        self._distinct: list[list[int]] = []
        self._gil_col: list[list[float]] = []
        self._ent_col: list[list[float]] = []
        for j, h in enumerate(self.hierarchies):
            anc = self._anc[j]
            per_leaf = np.bincount(lv[:, j], minlength=len(h.labels[0])).astype(np.float64)
            self._value_count[:, j] = per_leaf[lv[:, j]]
            covers = lm.node_cover(h)
            cov, sets, dist, gil, ent = [], [], [], [], []
            for lev in range(h.height + 1):
                c = covers[lev][anc[lev]]
                s = np.bincount(anc[lev], weights=per_leaf, minlength=len(h.labels[lev]))[anc[lev]]
                cov.append(c)
                sets.append(s)
                dist.append(len(np.unique(anc[lev][lv[:, j]])))
                gil.append(float(c[lv[:, j]].sum()))
                ent.append(float(np.sum(np.log2(s[lv[:, j]] / per_leaf[lv[:, j]]))))
            self._cover_leaf.append(cov)
            self._set_leaf.append(sets)
            self._distinct.append(dist)
            self._gil_col.append(gil)
            self._ent_col.append(ent)

    def _depth(self, node: Node) -> FloatArray:
        row = np.asarray(
            [lev / hh if hh else 0.0 for lev, hh in zip(node, self.heights, strict=True)]
        )
        out: FloatArray = np.broadcast_to(row, (self.n, self.q))
        return out

    def _cover(self, node: Node) -> FloatArray:
        out = np.empty((self.n, self.q))
        for j, lev in enumerate(node):
            out[:, j] = self._cover_leaf[j][lev][self.leaves[:, j]]
        return out

    def loss(self, node: Node, name: str) -> float:
        """Loss ``name`` (:data:`locpriv.tabular.quality.loss.LOSSES`) of the node's release,
        by the kernels of :mod:`locpriv.tabular.quality.loss`; cached."""
        which = lm.loss_name(name)
        got = self._losses.get((node, which))
        if got is not None:
            return got
        ev = self.evaluate(node)
        sup = ev.labels < 0
        if which == "prec":
            val = lm.precision_loss_of(self._depth(node), sup)
        elif which == "gil":
            val = lm.generalised_loss_of(self._cover(node), sup)
        elif which == "dm":
            val = lm.discernibility_of(ev.labels)
        elif which == "cavg":
            val = lm.average_class_size_of(ev.labels, self.check.models.k)
        else:
            sets = np.empty((self.n, self.q))
            for j, lev in enumerate(node):
                sets[:, j] = self._set_leaf[j][lev][self.leaves[:, j]]
            val = lm.non_uniform_entropy_of(self._value_count, sets, sup)
        self._losses[(node, which)] = val
        return val

    def lower_bound(self, node: Node, name: str) -> float:
        """A value no greater than :meth:`loss` of ``node``, from the levels alone (no class
        computation): the loss with nothing suppressed for the per-cell losses (a suppressed
        cell costs the most), ``max(n² / g, n k)`` (DM) and ``n / (g k)`` (C_AVG) with ``g``
        the product of the distinct recoded values per column (an upper bound of the classes)."""
        which = lm.loss_name(name)
        nd = self.n * self.q
        if which == "prec":
            return float(np.mean(self._depth(node)[0]))
        if which == "gil":
            return sum(self._gil_col[j][lev] for j, lev in enumerate(node)) / nd
        if which == "entropy":
            return sum(self._ent_col[j][lev] for j, lev in enumerate(node))
        g = self.max_classes(node)
        if which == "dm":
            # also >= n·k: a kept record's class has >= k records, a suppressed one costs n
            return max(float(self.n) * self.n / g, float(self.n) * min(self.check.models.k, self.n))
        return float(self.n) / (g * self.check.models.k)

    def max_classes(self, node: Node) -> int:
        """An upper bound of the node's classes from the levels alone: the product of the
        distinct recoded values per column, at most n."""
        g = 1
        for j, lev in enumerate(node):
            g = min(self.n, g * self._distinct[j][lev])
        return g

    def loss_monotone(self) -> bool:
        """Whether every loss is non-decreasing upwards over acceptable nodes: true when
        nothing is ever suppressed (MaxSup = 0); suppression can make a higher node cheaper."""
        return self.max_sup == 0

    # --- release --------------------------------------------------------------------------

    def release(self, node: Node, info: dict[str, object] | None = None) -> GeneralisedRelease:
        """The release of ``node``: hierarchy labels at its levels, ``"*"`` for suppressed
        records."""
        ev = self.evaluate(node)
        sup = ev.labels < 0
        values: list[tuple[str, ...]] = []
        for j, lev in enumerate(node):
            labs = np.asarray(self.hierarchies[j].labels[lev], dtype=object)
            col = labs[self._anc[j][lev][self.leaves[:, j]]]
            col[sup] = "*"
            values.append(tuple(str(v) for v in col))
        cover = self._cover(node)
        cover[sup] = 1.0
        depth = np.array(self._depth(node))
        depth[sup] = 1.0
        return GeneralisedRelease(
            columns=self.columns,
            values=tuple(values),
            labels=ev.labels.copy(),
            suppressed=sup,
            cover=cover,
            levels=node,
            info=dict(info or {}),
            depth=depth,
        )

    def facts(self) -> dict[str, object]:
        """Search facts for a release's ``info``."""
        return {
            "lattice_size": self.size,
            "nodes_checked": self.evaluations,
            "nodes_tagged": self.tagged,
            "max_suppressed": self.max_sup,
            "predictive_tagging": self.monotone,
        }
