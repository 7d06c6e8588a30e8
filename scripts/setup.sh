#!/usr/bin/env bash
# Set up a development environment: Debian's mosquitto and its command-line clients and Debian's
# chromium (headless, for the demo map's and the HTML risk report's tests; each only if missing) and .venv with locpriv[dev].
# Idempotent: safe to run again. Usage: bash scripts/setup.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [ ! -x /usr/sbin/mosquitto ] || ! command -v mosquitto_pub >/dev/null 2>&1; then
  echo "setup: installing Debian's mosquitto and mosquitto-clients" >&2
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq --no-install-recommends mosquitto mosquitto-clients >/dev/null
fi

# headless Chromium for tests/simulators/test_sim_map.py (the demo map) and
# tests/tabular/test_assess_cli.py (the HTML risk report); the demo does not need it
# (scripts/demo.sh sets LOCPRIV_SETUP_BROWSER=0)
if [ "${LOCPRIV_SETUP_BROWSER:-1}" != 0 ] && ! command -v chromium >/dev/null 2>&1; then
  echo "setup: installing Debian's chromium (headless browser for tests/simulators/test_sim_map.py and tests/tabular/test_assess_cli.py)" >&2
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi

# systemd-analyze for tests/integration/test_deploy.py (systemd's own check of the shipped
# units); test-only like Chromium, so the demo skips it too
if [ "${LOCPRIV_SETUP_BROWSER:-1}" != 0 ] && ! command -v systemd-analyze >/dev/null 2>&1; then
  echo "setup: installing Debian's systemd (systemd-analyze verify of deploy/systemd in the tests)" >&2
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq --no-install-recommends systemd >/dev/null
fi

python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $($python --version)" >&2
  "$python" -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev]'
# test-only: anonymeter 1.1.0 pins numpy<1.27 and pyarrow<22, which would downgrade the
# project's numpy 2 / pyarrow; its evaluators run unchanged on them, so it is installed without
# its pins (its other requirements, polars and scikit-learn, come with locpriv[test]).
.venv/bin/python -m pip install -q --disable-pip-version-check --no-deps 'anonymeter==1.1.0'
