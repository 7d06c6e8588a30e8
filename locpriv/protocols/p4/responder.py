"""Protocol 4 responder admission: whether a device answers a neighbour's request.

:class:`Responder` applies the distance limit and the token buckets of a
:class:`~locpriv.protocols.p4.types.ResponderPolicy` for
:class:`~locpriv.protocols.p4.machine.PeerMachine`, which checks its own broadcasts, the opt-out
and the reply topic first, and builds the reply.
"""

from __future__ import annotations

from locpriv.core.geo import haversine_m
from locpriv.protocols.p4.types import PeerConfig, TokenBucket
from locpriv.wire.messages import PeerRequest

__all__ = ["Responder"]


class Responder:
    """The responder's limits: distance, one token bucket per requester pseudonym (at most
    ``max_requesters``, oldest evicted first) and one overall bucket."""

    def __init__(self, config: PeerConfig) -> None:
        self.config = config
        policy = config.responder
        self._overall = TokenBucket(policy.overall_rate_per_s, policy.overall_burst)
        self._per: dict[str, TokenBucket] = {}

    def too_far(self, req: PeerRequest, own: tuple[float, float]) -> bool:
        """The requester's perturbed point is beyond the policy's distance (or the request's
        own ``max_distance_m``) from ``own`` (lon, lat)."""
        policy = self.config.responder
        limit = policy.max_distance_m if policy.max_distance_m is not None else self.config.reach_m
        if req.max_distance_m is not None:
            limit = min(limit, req.max_distance_m)
        return float(haversine_m(own[0], own[1], req.lon, req.lat)) > limit

    def refusal(self, req: PeerRequest, own: tuple[float, float], now: float) -> str | None:
        """Why a device whose perturbed point is ``own`` (lon, lat) does not answer ``req`` at
        ``now`` (a stats key), or None: answer. Takes the tokens the checks pass."""
        policy = self.config.responder
        if self.too_far(req, own):
            return "too_far"
        bucket = self._per.get(req.requester)
        if bucket is None:
            if len(self._per) >= policy.max_requesters:
                self._per.pop(next(iter(self._per)))
            bucket = TokenBucket(policy.per_requester_rate_per_s, policy.per_requester_burst)
            self._per[req.requester] = bucket
        if not bucket.take(now):
            return "rate_limited_requester"
        if not self._overall.take(now):
            return "rate_limited_overall"
        return None
