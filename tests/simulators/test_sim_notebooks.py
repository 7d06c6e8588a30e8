"""Notebooks run on small settings: their code cells are executed in order (outputs stripped)."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_and_is_stripped(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nb = json.loads(path.read_text(encoding="utf-8"))
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code, "a notebook without code"
    for cell in code:
        assert cell["outputs"] == [] and cell["execution_count"] is None, "outputs not stripped"
    monkeypatch.setenv("LOCPRIV_NOTEBOOK_SMALL", "1")
    namespace: dict[str, object] = {"__name__": "__notebook__"}
    for cell in code:
        exec(compile("".join(cell["source"]), f"{path.name}", "exec"), namespace)
    summaries = namespace.get("summaries")
    assert isinstance(summaries, dict) and len(summaries) == 3
    for name, summary in summaries.items():  # each run issued and answered queries
        assert summary["all"]["queries"] > 0 and summary["all"]["answered"] > 0, name
    import matplotlib.pyplot as plt

    plt.close("all")
