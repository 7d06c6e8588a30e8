"""Sans-I/O protocol machines: pure state machines, ``receive(message, now) -> effects``.

Nothing here imports asyncio or an MQTT client (a test checks it in a fresh interpreter):

* :mod:`~locpriv.protocols.effects` - what machines ask drivers to do;
* :mod:`~locpriv.protocols.dispatch` - raw messages to a machine: decode, route, check, reject;
* :mod:`~locpriv.protocols.trusted` - the anonymizer/mediator service machine (P1, P2, P3 and
  location updates), built from :mod:`~locpriv.protocols.p1`, :mod:`~locpriv.protocols.p2`
  and :mod:`~locpriv.protocols.p3`;
* :mod:`~locpriv.protocols.ds` - the location-based database server;
* :mod:`~locpriv.protocols.user` - the requester side of Protocols 1-3 (apps, simulators);
* :mod:`~locpriv.protocols.p4` - the device of Protocol 4 (requester and responder);
* :mod:`~locpriv.protocols.issuer` - the issuer of Protocol 4's pseudonym tokens;
* :mod:`~locpriv.protocols.seal`, :mod:`~locpriv.protocols.ids` - sealed tokens, random ids.

Every service machine has ``receive(message, now)``, ``on_deadline(now)``,
``next_deadline()`` and ``shutdown(now)`` (answers everything pending with ``unavailable``);
times are Unix seconds given by the driver.
"""
