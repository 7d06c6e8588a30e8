"""The core/driver boundary is a structure: pure modules load no asyncio and no MQTT client."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import pytest

import locpriv
import locpriv.core
import locpriv.protocols
import locpriv.wire

PURE_PACKAGES = (locpriv.core, locpriv.protocols, locpriv.wire)
DRIVER_ONLY = ("asyncio", "aiomqtt", "paho", "amqtt")


def _modules(package: object) -> list[str]:
    path = package.__path__  # type: ignore[attr-defined]
    prefix = package.__name__ + "."  # type: ignore[attr-defined]
    names = (m.name for m in pkgutil.walk_packages(path, prefix))
    return sorted(n for n in names if not n.endswith(".__main__"))


PURE = [m for p in PURE_PACKAGES for m in [p.__name__, *_modules(p)]]


@pytest.mark.parametrize("module", PURE)
def test_pure_module_loads_no_driver(module: str) -> None:
    code = (
        "import sys, importlib\n"
        f"importlib.import_module({module!r})\n"
        f"print(','.join(m for m in {DRIVER_ONLY!r} if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "", f"{module} loads {out}"


def test_every_module_imports() -> None:
    """Nothing in the package is left half-moved (a module that no longer imports)."""
    for name in _modules(locpriv):
        if ".tabular." in name and name.rsplit(".", 1)[1].startswith("_"):
            continue  # numba kernels compile on import in their own tests
        importlib.import_module(name)


def test_library_never_imports_the_simulators() -> None:
    code = (
        "import sys, importlib, pkgutil, locpriv\n"
        "for m in pkgutil.walk_packages(locpriv.__path__, 'locpriv.'):\n"
        "    if not m.name.endswith('.__main__'):\n"
        "        importlib.import_module(m.name)\n"
        "print(any(n == 'simulators' or n.startswith('simulators.') for n in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "False"
