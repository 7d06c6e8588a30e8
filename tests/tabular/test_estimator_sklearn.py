"""Microaggregator follows scikit-learn's estimator conventions (scikit-learn is a test-only
dependency): clone, get_params(deep=True), set_params, and the common checks that apply."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.utils.estimator_checks import check_estimator

from locpriv.errors import ConfigError
from locpriv.tabular import Microaggregator
from tests.tabular._mdav_helpers import CENSUS, needs_census

# The one common check that does not apply: fit's optional second argument is the confidential
# attributes S (it decides which groups are p-sensitive), not a target y of a supervised model.
NOT_APPLICABLE = {
    "check_fit_score_takes_y": "fit(X, S): S holds confidential attributes, not a target y",
}


@pytest.mark.filterwarnings("ignore:Estimator Microaggregator does not inherit")
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.SkipTestWarning")
def test_passes_scikit_learn_common_checks() -> None:
    results = check_estimator(
        Microaggregator(k=3), expected_failed_checks=NOT_APPLICABLE, on_fail=None
    )
    failed = [(r["check_name"], str(r["exception"])) for r in results if r["status"] == "failed"]
    assert failed == []
    passed = {r["check_name"] for r in results if r["status"] == "passed"}
    assert {"check_get_params_invariance", "check_set_params", "check_fit_idempotent"} <= passed


def test_clone_get_params_and_set_params() -> None:
    est = Microaggregator(k=4, p=2, method="mdav-seed", seed=7)
    params = est.get_params(deep=True)
    assert params == {
        "k": 4,
        "p": 2,
        "method": "mdav-seed",
        "seed": 7,
        "standardize": True,
        "time_budget_s": None,
        "progress": None,
        "block_size": 32768,
        "scheduler": None,
        "workers": 1,
        "workers_kind": "threads",
        "keep_order": False,
        "entropy_l": 1.0,
        "recursive": None,
        "t": None,
        "ordered": None,
    }
    twin = clone(est)
    assert twin is not est and twin.get_params() == params
    assert twin.set_params(k=5, method="enhanced-pk") is twin
    assert (twin.k, twin.method, est.k, est.method) == (5, "enhanced-pk", 4, "mdav-seed")
    assert repr(twin) == "Microaggregator(k=5, p=2, method='enhanced-pk', seed=7)"
    with pytest.raises(ConfigError, match="invalid parameter 'kk'"):
        twin.set_params(kk=3)


@needs_census
def test_clone_refits_to_the_same_partition_on_census() -> None:
    table = pd.read_csv(CENSUS)
    X = table.iloc[:, :12].to_numpy(dtype=float)
    S = pd.qcut(table["ERNVAL"].rank(method="first"), 10, labels=False).to_numpy()
    est = Microaggregator(k=3, p=2, method="mdav-seed").fit(X, S)
    again = clone(est).fit(X, S)
    assert not hasattr(clone(est), "labels_")
    np.testing.assert_array_equal(again.labels_, est.labels_)
    assert again.n_features_in_ == 12
