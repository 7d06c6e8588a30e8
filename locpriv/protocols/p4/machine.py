"""Protocol 4 (TTP-free): the device's peer machine, requester and responder in one (sans-I/O).

Requester, per query (``start_query``):

1. subscribe to two fresh random reply topics, one for peers and one for DS, so DS and peers
   cannot link the two by topic: peers answer on ``peer/cell/{cell}/r/{random}``
   (:meth:`~locpriv.wire.topics.Topics.peer_reply`, ``cell`` that of the device's perturbed
   point), which the driver reads on its main connection; DS on ``reply/p4-{random}``, read on
   a connection of its own; then publish a :class:`PeerRequest` carrying the perturbed point
   and the peers' reply topic to the 3×3 block of discovery cells around it
   (:mod:`locpriv.core.cells`);
2. collect :class:`PeerReply` messages for ``window_s`` seconds, dropping and counting invalid,
   unsolicited, duplicated (per responder, per point), stale and implausibly far ones;
3. choose ``k-1`` replies with :func:`locpriv.core.grouping.select_group` (A_min < A < A_max, least
   SSE); when infeasible broadcast again (replies accumulate across rounds), up to
   ``max_rounds``, then fail with :class:`GroupInfeasible` naming the reason;
4. send a :class:`DSQuery` with the group centroid (:class:`CentroidLocation`, no identifier) and
   a radius from a fixed ladder computed from the group's points only (never from the true
   position: :func:`~locpriv.protocols.p4.types.query_radius`), then refine the candidate answer
   with the true location (:func:`locpriv.core.poi.refine`).

Pseudonym tokens (:mod:`locpriv.protocols.p4.tokens`): a device with a ``login`` asks the issuer
(``issue/{login}``) for a blind signature over each period's pseudonym, shortly before the
period starts; its requests and replies carry the token and an Ed25519 proof. Once tokens are
required (:attr:`PeerConfig.require_tokens`), replies and requests without a valid one are
dropped (``no_token``, ``bad_token``, ``bad_proof``, ``token_period``, ``no_issuer_key``), so
one login contributes at most the issuer's ``per_login`` points to a group.

Responder (``receive(PeerRequest)``): answers with the device's current perturbed point under
:class:`ResponderPolicy` (opt-out, maximum distance, token buckets per requester pseudonym and
overall: :mod:`locpriv.protocols.p4.responder`); it never replies to itself, and only on a
``reply_to`` of the form ``peer/cell/{cell}/r/{id}`` whose ``cell`` is the cell of the request's
point, the cell the request was published around (``bad_reply_to`` otherwise): a request cannot
make peers publish anywhere else.

The perturbed point is one :class:`~locpriv.core.noise.PerturbedPoint` shared by requests and
replies (the averaging defence); the device listens on the cell of that perturbed point.
Times are Unix seconds given by the driver; noise comes from the ``rng`` passed in, and
pseudonyms, correlation ids and reply topics from ``ids`` (by default the OS's CSPRNG: noise
outputs of a PRNG would let an observer predict them). ``secret`` keys the place noise of the
static-device defence (default: a fresh random one per machine; a device should keep its own
across restarts, see :class:`locpriv.peer.PeerClient`).
Effects and configuration live in :mod:`locpriv.protocols.p4.types` and are re-exported here;
a query's state, reply screening, candidate thinning, DS query and answer in
:mod:`locpriv.protocols.p4.query`.
"""

from __future__ import annotations

import functools
import logging
import math
import random
import secrets
from collections import Counter

import numpy as np

from locpriv.core.cells import CellGrid
from locpriv.core.geo import LocalProjection, LonLat
from locpriv.core.grouping import Infeasible, select_group
from locpriv.core.noise import PerturbedPoint
from locpriv.errors import ConfigError, GroupInfeasible, RemoteError, RequestTimeout
from locpriv.protocols.effects import Done, Effect, Failed, Send, Subscribe, Unsubscribe
from locpriv.protocols.ids import IdSource, new_id
from locpriv.protocols.p4.query import OpenQuery
from locpriv.protocols.p4.responder import Responder
from locpriv.protocols.p4.tokens import TokenVerifier, TokenWallet, period_of
from locpriv.protocols.p4.types import MAX_RADIUS_M, PeerAnswer, PeerConfig
from locpriv.wire.messages import (
    ErrorReply,
    IssueAnswer,
    IssueRequest,
    IssuerKeys,
    Message,
    PeerReply,
    PeerRequest,
    Query,
    QueryAnswer,
)
from locpriv.wire.topics import Topics

__all__ = ["PeerMachine", "device_point"]

log = logging.getLogger(__name__)

PROJECTION_GRID_DEG = 0.1
"""Spacing (degrees) of the origins of the local projections used for grouping."""
TOKEN_RETRY_S = 30.0
"""Wait (s) before asking the issuer again after a request went unanswered."""
_JITTER = random.SystemRandom()


def device_point(config: PeerConfig, secret: bytes | None = None) -> PerturbedPoint:
    """The perturbed point a device publishes, with ``config``'s static-place defence.

    With ``keyed_noise`` the place noise is keyed by ``secret`` (a fresh 32-byte secret when
    ``None``); otherwise reuse radius/TTL and the per-place draw cap apply. The one place that
    turns a :class:`PeerConfig` into a :class:`PerturbedPoint` (the device and the studies).
    """
    return PerturbedPoint(
        config.mechanism,
        reuse_radius_m=config.reuse_radius_m,
        reuse_ttl_s=config.reuse_ttl_s,
        max_draws_per_place=config.max_draws_per_place,
        enabled=config.reuse_enabled,
        secret=(secret or secrets.token_bytes(32)) if config.keyed_noise else None,
        rekey_s=config.rekey_s,
        region_m=config.noise_region_m,
        hold_factor=config.hold_factor,
        max_hold_m=config.max_hold_m,
    )


@functools.lru_cache(maxsize=64)
def _projection(lat0: float, lon0: float) -> LocalProjection:
    return LocalProjection(lat0, lon0)


class PeerMachine:
    """One device: requester and responder (sans-I/O).

    Inputs: :meth:`set_location`, :meth:`start_query`, :meth:`receive`, :meth:`receive_invalid`,
    :meth:`on_deadline`; outputs: lists of :data:`Effect`. ``stats`` counts everything dropped
    or refused, by reason.
    """

    def __init__(
        self,
        config: PeerConfig,
        *,
        rng: np.random.Generator,
        topics: Topics | None = None,
        ids: IdSource = new_id,
        secret: bytes | None = None,
        login: str | None = None,
    ) -> None:
        self.config = config
        self.login = login
        """The broker login whose ``issue/{login}`` topic asks for tokens (None: never ask)."""
        self.topics = topics or Topics()
        self.rng = rng
        """The noise generator (only noise: identifiers come from ``ids``)."""
        self.ids = ids
        self.grid = CellGrid(config.side_m)
        self.point = device_point(config, secret)
        self.stats: Counter[str] = Counter()
        self._true: LonLat | None = None
        self._cell_topic: str | None = None
        self.wallet = TokenWallet()
        self.verifier = TokenVerifier(config.pseudonym_ttl_s, mode=config.require_tokens)
        self._token_due: float | None = None
        self._token_retry_at = -math.inf
        self._leads: dict[int, float] = {}
        self._queries: dict[str, OpenQuery] = {}
        self._by_cid: dict[str, str] = {}
        self._by_topic: dict[str, str] = {}
        self._responder = Responder(config)

    # ------------------------------------------------------------------ helpers

    def _token(self) -> str:
        return self.ids()

    def period(self, now: float) -> int:
        """The pseudonym period of ``now``: ``floor(now / pseudonym_ttl_s)``."""
        return period_of(now, self.config.pseudonym_ttl_s)

    def pseudonym(self, now: float) -> str:
        """The current pseudonym (an Ed25519 public key, new every period of
        ``pseudonym_ttl_s``, on the same boundaries for every device)."""
        return self.wallet.pseudonym(self.period(now))

    @property
    def subscriptions(self) -> list[str]:
        """Standing subscriptions of the main connection (discovery cell, issuer keys)."""
        return [t for t in (self._cell_topic, self.topics.issuer_keys) if t is not None]

    @property
    def cell_topic(self) -> str | None:
        """The discovery topic the device listens on (cell of its perturbed point)."""
        return self._cell_topic

    @property
    def pending(self) -> int:
        """Queries in flight."""
        return len(self._queries)

    def perturbed(self, now: float) -> LonLat | None:
        """The current perturbed position (the one published), or None without location."""
        if self._true is None:
            return None
        return LonLat(*self.point.current(self._true.lon, self._true.lat, now, self.rng))

    def _refresh(self, now: float) -> tuple[LonLat | None, list[Effect]]:
        own = self.perturbed(now)
        if own is None:
            return None, []
        effects: list[Effect] = []
        topic = self.topics.peer_cell(self.grid.cell_of(*own))
        if topic != self._cell_topic:
            if self._cell_topic is not None:
                effects.append(Unsubscribe(self._cell_topic))
            effects.append(Subscribe(topic, qos=0))
            self._cell_topic = topic
        return own, effects

    def _projection_for(self, lon: float, lat: float) -> LocalProjection:
        """A cached aeqd projection centred on the 0.1° grid node nearest ``(lon, lat)``.

        Points of a group lie within a few km of it, where aeqd's scale error is below 1e-6;
        building a projection costs tens of ms, so a device builds one per ~10 km moved (and
        :meth:`set_location` builds it ahead of the first query).
        """
        step = PROJECTION_GRID_DEG
        return _projection(round(round(lat / step) * step, 6), round(round(lon / step) * step, 6))

    # ------------------------------------------------------------------- inputs

    def set_location(self, lon_deg: float, lat_deg: float, now: float) -> list[Effect]:
        """The device's true position (degrees); may move its discovery subscription."""
        if not (-90.0 <= lat_deg <= 90.0 and -180.0 <= lon_deg <= 180.0):
            raise ConfigError("location out of range")
        self._true = LonLat(float(lon_deg), float(lat_deg))
        own, effects = self._refresh(now)
        if own is not None:
            self._projection_for(*own)  # build (and cache) it off the query path
        return effects

    def start_query(self, query: Query, now: float) -> tuple[str, list[Effect]]:
        """Begin a query; returns its id and the effects (subscriptions, broadcasts)."""
        if self._true is None:
            raise ConfigError("set_location() before query()")
        own, effects = self._refresh(now)
        assert own is not None
        qid = self._token()
        q = OpenQuery(
            id=qid,
            query=query,
            true_lon=self._true[0],
            true_lat=self._true[1],
            own_lon=own[0],
            own_lat=own[1],
            peer_topic=self.topics.peer_reply(self.grid.cell_of(*own), self._token()),
            ds_topic=self.topics.reply(f"p4-{self._token()}"),
            started=now,
            deadline=now + self.config.window_s,
        )
        self._queries[qid] = q
        self._by_topic[q.peer_topic] = qid
        self._by_topic[q.ds_topic] = qid
        effects += [Subscribe(q.peer_topic), Subscribe(q.ds_topic)]
        effects += self._broadcast(q, now)
        log.debug("p4 query %s started", qid)
        return qid, effects

    def _broadcast(self, q: OpenQuery, now: float) -> list[Effect]:
        cid = self._token()
        q.cids.add(cid)
        self._by_cid[cid] = q.id
        period = self.period(now)
        request = PeerRequest(
            correlation_id=cid,
            reply_to=q.peer_topic,
            requester=self.wallet.pseudonym(period),
            lat=q.own_lat,
            lon=q.own_lon,
            t=max(0.0, now),
            max_distance_m=min(self.config.reach_m, MAX_RADIUS_M),
        )
        signed = self.wallet.sign(request, period)
        return [
            Send(self.topics.peer_cell(c), signed, qos=0)
            for c in self.grid.block(q.own_lon, q.own_lat)
        ]

    def receive(self, message: Message, now: float) -> list[Effect]:
        """A decoded message from a discovery or reply topic."""
        if isinstance(message, PeerRequest):
            return self._respond(message, now)
        if isinstance(message, PeerReply):
            self._collect(message, now)
            return []
        if isinstance(message, IssuerKeys):
            before = {p: k.public_numbers() for p, k in self.verifier.keys.items()}
            problem = self.verifier.update(message, now)
            if problem is not None:
                self.stats[problem] += 1
                return []
            for period, key in self.verifier.keys.items():
                if period in before and before[period] != key.public_numbers():
                    self.wallet.forget(period)  # the issuer replaced a key: fetch again
                    self.stats["issuer_key_replaced"] += 1
            return self._token_effects(now)
        if isinstance(message, IssueAnswer) or (
            isinstance(message, ErrorReply) and message.correlation_id in self.wallet.pending
        ):
            return self._issued(message)
        if isinstance(message, QueryAnswer | ErrorReply):
            return self._ds_reply(message, now)
        self.stats["unexpected_type"] += 1
        return []

    def receive_invalid(self, topic: str, now: float) -> None:
        """The driver could not decode a payload received on ``topic``: count it."""
        qid = self._by_topic.get(topic)
        if qid is not None and qid in self._queries:
            self._queries[qid].dropped["invalid"] += 1
        self.stats["invalid"] += 1

    # --------------------------------------------------------------- responder

    def _respond(self, req: PeerRequest, now: float) -> list[Effect]:
        if req.correlation_id in self._by_cid or self.wallet.owns(req.requester):
            return []  # our own broadcast
        if not self.config.responder.enabled:
            self.stats["opted_out"] += 1
            return []
        if self.topics.peer_reply_cell(req.reply_to) != self.grid.cell_of(req.lon, req.lat):
            self.stats["bad_reply_to"] += 1  # only into the request's own cell: no reflection
            return []
        own, effects = self._refresh(now)
        if own is None:
            self.stats["no_location"] += 1
            return effects
        # the cheap distance check, then certification, then the token buckets: uncertified
        # requests must not drain them
        refusal = "too_far" if self._responder.too_far(req, own) else None
        if refusal is None and self.verifier.required:
            why = self.verifier.check(req, now)
            refusal = None if why is None else f"request_{why}"
        if refusal is None:
            refusal = self._responder.refusal(req, own, now)
        if refusal is not None:
            self.stats[refusal] += 1
            return effects
        self.stats["replied"] += 1
        period = self.period(now)
        reply = PeerReply(
            correlation_id=req.correlation_id,
            responder=self.wallet.pseudonym(period),
            lat=own[1],
            lon=own[0],
            t=max(0.0, now),
        )
        return [*effects, Send(req.reply_to, self.wallet.sign(reply, period))]

    # ------------------------------------------------------------------ tokens

    def _token_effects(self, now: float) -> list[Effect]:
        """Ask the issuer for the tokens due at ``now`` (current period; the next one from a
        random instant in the last 2-10 % of the current period, so devices do not all ask at
        once) and expire unanswered requests; sets the next token deadline."""
        effects: list[Effect] = []
        for cid, p in [(c, p) for c, p in self.wallet.pending.items() if p.deadline <= now]:
            del self.wallet.pending[cid]
            self._by_topic.pop(p.topic, None)
            effects.append(Unsubscribe(p.topic))
            self.stats["token_timeout"] += 1
            self._token_retry_at = now + TOKEN_RETRY_S
        self._token_due = None
        if self.login is None or not self.verifier.keys:
            return effects
        ttl = self.config.pseudonym_ttl_s
        cur = self.period(now)
        nxt_start = (cur + 1) * ttl
        lead = self._leads.setdefault(cur + 1, ttl * _JITTER.uniform(0.02, 0.1))
        due = [cur] + ([cur + 1] if now >= nxt_start - lead else [])
        if now >= self._token_retry_at:
            for period in due:
                if period in self.verifier.keys and self.wallet.wanted(period):
                    effects += self._ask_issuer(period, now)
        deadlines = [p.deadline for p in self.wallet.pending.values()]
        if self._token_retry_at > now:
            deadlines.append(self._token_retry_at)
        deadlines.append(nxt_start - lead if nxt_start - lead > now else nxt_start)
        self._token_due = min(deadlines)
        for old in [e for e in self._leads if e <= cur]:
            del self._leads[old]
        return effects

    def _ask_issuer(self, period: int, now: float) -> list[Effect]:
        assert self.login is not None
        cid = self._token()
        topic = self.topics.reply(f"p4-{self._token()}")
        pk = self.verifier.keys[period]
        blinded = self.wallet.begin(period, pk, cid, topic, now + self.config.ds_timeout_s)
        self._by_topic[topic] = cid
        request = IssueRequest(
            correlation_id=cid,
            reply_to=topic,
            user_id=self.login,
            period=period,
            blinded_msg=blinded,
        )
        self.stats["token_requested"] += 1
        return [Subscribe(topic), Send(self.topics.issue(self.login), request)]

    def _issued(self, msg: IssueAnswer | ErrorReply) -> list[Effect]:
        cid = msg.correlation_id or ""
        pending = self.wallet.pending.get(cid)
        if pending is None:
            self.stats["unsolicited"] += 1
            return []
        self._by_topic.pop(pending.topic, None)
        if isinstance(msg, ErrorReply):
            del self.wallet.pending[cid]
            self.wallet.refused.add(pending.period)
            self.stats[f"token_refused_{msg.code}"] += 1
            log.info("issuer refused a token (%s)", msg.code)
        elif self.wallet.complete(cid, msg.blind_sig):
            self.stats["token_issued"] += 1
        else:
            self.stats["token_invalid"] += 1
        return [Unsubscribe(pending.topic)]

    # --------------------------------------------------------------- requester

    def _collect(self, rep: PeerReply, now: float) -> None:
        qid = self._by_cid.get(rep.correlation_id)
        q = self._queries.get(qid) if qid is not None else None
        if q is None or q.phase != "collect":
            self.stats["unsolicited"] += 1
            return
        reason = q.reject(rep, now, self.config, self.pseudonym(now))
        if reason is None and self.verifier.required:
            reason = self.verifier.check(rep, now)
        if reason is not None:
            q.dropped[reason] += 1
            self.stats[f"reply_{reason}"] += 1
            return
        q.replies[rep.responder] = (rep.lon, rep.lat)
        q.points.add((rep.lon, rep.lat))

    def query_of(self, correlation_id: str) -> str | None:
        """The id of this device's open query that ``correlation_id`` (a peer request or DS
        query it sent) belongs to, or None."""
        return self._by_cid.get(correlation_id)

    def next_deadline(self) -> float | None:
        """The earliest instant (s) :meth:`on_deadline` must run, or None."""
        due = min((q.deadline for q in self._queries.values()), default=None)
        if self._token_due is not None:
            due = self._token_due if due is None else min(due, self._token_due)
        return due

    def on_deadline(self, now: float) -> list[Effect]:
        """Close collection windows and time out DS queries that are due at ``now``."""
        effects: list[Effect] = []
        if self._token_due is not None and self._token_due <= now:
            effects += self._token_effects(now)
        for q in [q for q in self._queries.values() if q.deadline <= now]:
            if q.phase == "collect":
                effects += self._close_window(q, now)
            else:
                effects += self._finish(
                    q,
                    Failed(
                        q.id, RequestTimeout(f"DS did not answer in {self.config.ds_timeout_s} s")
                    ),
                )
        return effects

    def _close_window(self, q: OpenQuery, now: float) -> list[Effect]:
        cfg = self.config
        proj = self._projection_for(q.own_lon, q.own_lat)
        own_xy, cand = q.candidates(proj, cfg)
        # Called through this module's globals: benchmarks/bench_peer.py times it by patching.
        result = select_group(
            (float(own_xy[0]), float(own_xy[1])),
            cand,
            cfg.k,
            cfg.a_min_m2,
            cfg.a_max_m2,
            area=cfg.area,
            node_budget=cfg.node_budget,
        )
        if isinstance(result, Infeasible):
            self.stats[f"round_{result.reason.value}"] += 1
            if q.rounds < cfg.max_rounds:
                q.rounds += 1
                q.deadline = now + cfg.window_s
                log.debug("p4 query %s: round %d (%s)", q.id, q.rounds, result.reason.value)
                return self._broadcast(q, now)
            err = GroupInfeasible(
                f"{result.reason.value}: {result.detail} "
                f"({len(q.replies)} usable replies after {q.rounds} rounds)",
                reason_code=result.reason.value,
            )
            return self._finish(q, Failed(q.id, err))
        ds = q.ask_ds(
            result,
            cand,
            (float(own_xy[0]), float(own_xy[1])),
            proj,
            config=cfg,
            cid=self._token(),
            now=now,
        )
        self._by_cid[q.ds_cid] = q.id
        for cid in q.cids:
            self._by_cid.pop(cid, None)
        return [Send(self.topics.ds_query, ds), Unsubscribe(q.peer_topic)]

    def _ds_reply(self, msg: QueryAnswer | ErrorReply, now: float) -> list[Effect]:
        qid = self._by_cid.get(msg.correlation_id or "")
        q = self._queries.get(qid) if qid is not None else None
        if q is None or q.phase != "ds" or msg.correlation_id != q.ds_cid:
            self.stats["unsolicited"] += 1
            return []
        if isinstance(msg, ErrorReply):
            return self._finish(q, Failed(q.id, RemoteError(msg.code, msg.reason, msg.field)))
        return self._finish(q, Done(q.id, q.answer(msg, now)))

    def _finish(self, q: OpenQuery, outcome: Done[PeerAnswer] | Failed) -> list[Effect]:
        self._queries.pop(q.id, None)
        for cid in (*q.cids, q.ds_cid):
            self._by_cid.pop(cid, None)
        self._by_topic.pop(q.peer_topic, None)
        self._by_topic.pop(q.ds_topic, None)
        effects: list[Effect] = []
        if q.phase == "collect":
            effects.append(Unsubscribe(q.peer_topic))
        effects += [Unsubscribe(q.ds_topic), outcome]
        return effects

    def cancel(self, query_id: str) -> list[Effect]:
        """Forget a query (the caller gave up); returns the unsubscriptions."""
        q = self._queries.get(query_id)
        if q is None:
            return []
        return [
            e
            for e in self._finish(q, Failed(q.id, RequestTimeout("cancelled")))
            if not isinstance(e, Failed)
        ]
