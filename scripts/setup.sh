#!/usr/bin/env bash
# Set up a development environment: Debian's mosquitto and its command-line clients, for the tests
# also Debian's chromium (headless) and systemd (systemd-analyze), each only if missing, and .venv
# with locpriv[dev].
# Idempotent: safe to run again. Usage: bash scripts/setup.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

apt_install() {  # apt_install WHY PACKAGE...: Debian packages, with sudo unless root
  echo "setup: installing Debian's ${*:2} ($1)" >&2
  local sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq --no-install-recommends "${@:2}" >/dev/null
}

if [ ! -x /usr/sbin/mosquitto ] || ! command -v mosquitto_pub >/dev/null 2>&1; then
  apt_install "the broker of the services and the tests" mosquitto mosquitto-clients
fi

# Test-only packages (the demo skips them: scripts/demo.sh sets LOCPRIV_SETUP_BROWSER=0)
if [ "${LOCPRIV_SETUP_BROWSER:-1}" != 0 ]; then
  # headless Chromium for the demo map and the HTML risk report tests
  command -v chromium >/dev/null 2>&1 ||
    apt_install "headless browser for tests/simulators/test_sim_map.py and tests/tabular/test_assess_cli.py" chromium
  # systemd-analyze: systemd's own check of the shipped units in tests/integration/test_deploy.py
  command -v systemd-analyze >/dev/null 2>&1 ||
    apt_install "systemd-analyze verify of deploy/systemd in the tests" systemd
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
