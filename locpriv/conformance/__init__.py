"""The wire protocol's conformance kit: language-neutral JSON test vectors and a live check.

``vectors/tiles.json`` (points to tiles for several deployment configs, points within 1 mm of
tile borders), ``vectors/areas.json`` (regions to ``area_m2``) and ``vectors/messages.json``
(messages to the error code and field they get) are read by :mod:`locpriv.conformance.vectors`;
``locpriv conformance --broker URL`` (:mod:`locpriv.conformance.live`) runs the client-side
contract against a running deployment. docs/protocol.md describes both.
"""
