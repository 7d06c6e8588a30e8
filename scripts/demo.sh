#!/usr/bin/env bash
# Set up (scripts/setup.sh), then run the end-to-end demo. Extra args go to `locpriv demo`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
LOCPRIV_SETUP_BROWSER=0 bash scripts/setup.sh
exec .venv/bin/locpriv -q demo "$@"
