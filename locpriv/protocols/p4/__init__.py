"""Protocol 4 (TTP-free): the device machine, its queries, responder and types (sans-I/O).

:class:`PeerMachine` (:mod:`.machine`) is one device, requester and responder; a query's state
lives in :mod:`.query`, the responder's policy in :mod:`.responder`, pseudonym tokens (wallet
and verifier) in :mod:`.tokens`, configuration and the answer in :mod:`.types`. Its effects
are those of :mod:`locpriv.protocols.effects`.
"""

from locpriv.protocols.p4.machine import PeerMachine
from locpriv.protocols.p4.types import PeerAnswer, PeerConfig, ResponderPolicy

__all__ = ["PeerAnswer", "PeerConfig", "PeerMachine", "ResponderPolicy"]
