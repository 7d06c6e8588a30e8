"""Every notebook is committed with its outputs and executes from a clean kernel.

The execution runs on small settings (``LOCPRIV_NOTEBOOK_SMALL=1``; each notebook says what that
changes) in a fresh kernel through nbclient, in the notebook's own directory. A cell that raises,
including the notebooks' own checks of what they measured, fails the test. Notebooks that read
``../shared/data`` declare it in their metadata (``locpriv.data``); they are skipped, with the
path in the reason, only when that directory does not exist beside the checkout.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
DATA = ROOT.parent / "shared" / "data"


def _code_cells(nb: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    return [c for c in nb.cells if c.cell_type == "code"]


EXPECTED = {
    "mobility_and_privacy",
    "solanas_2008",
    "truta_2007",
    "domingo_ferrer_2006",
    "generalisation",
}


def test_every_expected_notebook_is_there() -> None:
    assert {p.stem for p in NOTEBOOKS} >= EXPECTED


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_with_outputs_of_one_clean_run(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    code = _code_cells(nb)
    assert code, "a notebook without code"
    counts = [c.execution_count for c in code]
    assert counts == list(range(1, len(code) + 1)), f"not one top-to-bottom run: {counts}"
    errors = [o for c in code for o in c.outputs if o.output_type == "error"]
    assert not errors, f"committed with an error: {errors[0].get('ename')}"
    assert any(c.outputs for c in code), "no outputs committed"


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_executes_on_small_settings(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nb = nbformat.read(path, as_version=4)
    needs = nb.metadata.get("locpriv", {}).get("data", [])
    missing = [name for name in needs if not (DATA / name).exists()]
    if missing:
        pytest.skip(f"data not found: {', '.join(str(DATA / m) for m in missing)}")
    monkeypatch.setenv("LOCPRIV_NOTEBOOK_SMALL", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    client = NotebookClient(nb, timeout=240, resources={"metadata": {"path": str(path.parent)}})
    client.execute()  # raises CellExecutionError naming the failing cell
    assert all(c.execution_count for c in _code_cells(nb))
