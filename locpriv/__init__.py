"""locpriv: location privacy over MQTT and p-sensitive k-anonymity of microdata.

Two halves share this package:

* streaming location privacy: wire messages (:mod:`locpriv.wire.messages`), geometry
  (:mod:`locpriv.core.geo`), cloaking cores, services for Protocols 1-3, the TTP-free
  peer library for Protocol 4;
* the batch core :mod:`locpriv.tabular`: k-anonymity and p-sensitive k-anonymity
  of tabular microdata by microaggregation.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("locpriv")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

__all__ = ["__version__"]
