"""Execute notebooks in place so the committed copies carry their outputs.

Usage: .venv/bin/python scripts/run_notebooks.py [notebooks/NAME.ipynb ...]  (default: all)

Runs with the notebooks' full settings (``LOCPRIV_NOTEBOOK_SMALL=0``) unless the environment
says otherwise; the test run (tests/notebooks/test_notebooks.py) executes them again with
``LOCPRIV_NOTEBOOK_SMALL=1``.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str]) -> None:
    paths = [Path(a) for a in argv] or sorted((ROOT / "notebooks").glob("*.ipynb"))
    os.environ.setdefault("LOCPRIV_NOTEBOOK_SMALL", "0")
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        t0 = time.perf_counter()
        NotebookClient(
            nb, timeout=1800, resources={"metadata": {"path": str(path.parent)}}
        ).execute()
        nbformat.write(nb, path)
        print(f"{path}: {time.perf_counter() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
