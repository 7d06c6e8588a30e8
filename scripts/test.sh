#!/usr/bin/env bash
# Set up (scripts/setup.sh), then lint, type-check and run every test. Extra args go to pytest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
echo "== ruff check" && ruff check .
echo "== ruff format --check" && ruff format --check .
echo "== mypy" && mypy locpriv simulators
echo "== pytest" && pytest "$@"
