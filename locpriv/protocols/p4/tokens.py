"""Protocol 4 pseudonym tokens: anonymous, rate-limited credentials (sans-I/O).

A device's pseudonym of period ``e`` (``e = floor(t / period_s)``) is ``k`` + the base64url
Ed25519 public key of a key pair the device draws for that period; the issuer's RFC 9474 blind
signature (:mod:`locpriv.core.blind_rsa`, RSABSSA-SHA384-PSS-Deterministic: the public key is
the high-entropy input, as Privacy Pass's nonce) over ``token_input(e, pseudonym)`` under the
issuer's key **of period e** certifies it. Every request and reply carries the token and a
``proof``: the Ed25519 signature of the message under that key, so a token seen in someone
else's message cannot be replayed with other points. The issuer signs with a
period's key only while that period is current or next, and at most ``per_login`` times per
login and key, so one login holds at most ``per_login`` certified pseudonyms per period; it
sees the login and the period, never the pseudonym (the request is blinded), and the
signature it returns cannot be linked to the request (RFC 9474 §7.3).

:class:`TokenWallet` is the device's side (pseudonyms per period, blinding state, tokens),
:class:`TokenVerifier` the requester's and responder's (the issuer's public keys per period,
token checks with a cache). Values on the wire are base64url without padding.
"""

from __future__ import annotations

import base64
import binascii
import math
import struct
from collections import OrderedDict
from dataclasses import dataclass
from typing import Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from locpriv.core.blind_rsa import PSS_DETERMINISTIC, BlindRSAError, blind, finalize, verify
from locpriv.wire.messages import IssuerKey, IssuerKeys, PeerReply, PeerRequest

__all__ = [
    "MIN_KEY_BITS",
    "VARIANT",
    "TokenVerifier",
    "TokenWallet",
    "b64d",
    "b64e",
    "issuer_key",
    "period_of",
    "proof_input",
    "public_key",
    "token_input",
]

VARIANT: Final = PSS_DETERMINISTIC
"""The RFC 9474 variant of every token."""
MIN_KEY_BITS: Final = 2048
"""Smallest issuer modulus a device accepts, bits."""
_DOMAIN: Final = b"locpriv/p4-pseudonym-token/v1\x00"


def b64e(data: bytes) -> str:
    """Base64url without padding."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64d(text: str) -> bytes:
    """Inverse of :func:`b64e`; ValueError on anything else."""
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as exc:
        raise ValueError("not base64url") from exc


def period_of(t: float, period_s: float) -> int:
    """The pseudonym period holding Unix time ``t`` (s): ``floor(t / period_s)``."""
    return max(0, math.floor(t / period_s))


def token_input(period: int, pseudonym: str) -> bytes:
    """The message the issuer blindly signs: a domain tag, the period (8 bytes) and the
    pseudonym (ASCII)."""
    return _DOMAIN + period.to_bytes(8, "big") + pseudonym.encode("ascii")


def proof_input(message: PeerRequest | PeerReply) -> bytes:
    """What a pseudonym's Ed25519 key signs in a request or reply: its type, correlation id,
    reply topic (requests), pseudonym, point, time and period."""
    if isinstance(message, PeerRequest):
        head = f"req|{message.correlation_id}|{message.reply_to}|{message.requester}"
        extra = message.max_distance_m if message.max_distance_m is not None else -1.0
    else:
        head = f"rep|{message.correlation_id}|{message.responder}"
        extra = -1.0
    numbers = struct.pack(">ddddq", message.lat, message.lon, message.t, extra, message.period or 0)
    return _DOMAIN + head.encode("ascii") + b"|" + numbers


def _ed25519_of(pseudonym: str) -> ed25519.Ed25519PublicKey | None:
    if not pseudonym.startswith("k"):
        return None
    try:
        raw = b64d(pseudonym[1:])
        return ed25519.Ed25519PublicKey.from_public_bytes(raw) if len(raw) == 32 else None
    except ValueError:
        return None


def public_key(key: IssuerKey) -> rsa.RSAPublicKey:
    """The RSA key of a wire :class:`IssuerKey`; ValueError when it is not a usable key
    (modulus below :data:`MIN_KEY_BITS`, even modulus or exponent)."""
    n = int.from_bytes(b64d(key.n), "big")
    if n.bit_length() < MIN_KEY_BITS or n % 2 == 0 or key.e % 2 == 0:
        raise ValueError(f"issuer key of period {key.period} is not a usable RSA key")
    return rsa.RSAPublicNumbers(key.e, n).public_key()


def issuer_key(period: int, pk: rsa.RSAPublicKey) -> IssuerKey:
    """The wire form of ``pk`` for ``period``."""
    numbers = pk.public_numbers()
    n = numbers.n
    return IssuerKey(
        period=period, n=b64e(n.to_bytes((n.bit_length() + 7) // 8, "big")), e=numbers.e
    )


class TokenVerifier:
    """The issuer's public keys per period and the check of a (pseudonym, period, token).

    ``skew_s``: a token's period must be the period of ``now ± skew_s`` (clock skew between
    devices; near a boundary one login may so show ``2·per_login`` pseudonyms). ``required``
    becomes True, and stays so, once an issuer key has been seen (``mode`` None), so that a
    device cannot be talked out of checking later.
    """

    def __init__(self, period_s: float, *, mode: bool | None = None, skew_s: float = 30.0) -> None:
        self.period_s = period_s
        self.mode = mode
        self.skew_s = skew_s
        self.keys: dict[int, rsa.RSAPublicKey] = {}
        self.per_login: int | None = None
        self._seen = False
        self._ok: OrderedDict[tuple[int, str, str], None] = OrderedDict()

    @property
    def required(self) -> bool:
        """Whether replies and requests without a valid token are dropped."""
        return self.mode if self.mode is not None else self._seen

    def update(self, msg: IssuerKeys, now: float) -> str | None:
        """Take the keys of ``msg``; the reason it is ignored (a stats key), or None."""
        if not math.isclose(msg.period_s, self.period_s):
            return "issuer_period_mismatch"
        fresh: dict[int, rsa.RSAPublicKey] = {}
        for key in msg.keys:
            try:
                fresh[key.period] = public_key(key)
            except ValueError:
                return "issuer_key_invalid"
        self._seen = True
        self.per_login = msg.per_login
        self.keys.update(fresh)
        oldest = period_of(now, self.period_s) - 1
        for p in [p for p in self.keys if p < oldest]:
            del self.keys[p]
        return None

    def check(self, message: PeerRequest | PeerReply, now: float) -> str | None:
        """Why ``message`` is not from a certified pseudonym at ``now`` (``no_token``,
        ``token_period``, ``no_issuer_key``, ``bad_proof``, ``bad_token``), or None: it is."""
        period, token, proof = message.period, message.token, message.proof
        pseudonym = message.requester if isinstance(message, PeerRequest) else message.responder
        if period is None or token is None or proof is None:
            return "no_token"
        lo = period_of(now - self.skew_s, self.period_s)
        hi = period_of(now + self.skew_s, self.period_s)
        if not lo <= period <= hi:
            return "token_period"
        pk = self.keys.get(period)
        if pk is None:
            return "no_issuer_key"
        holder = _ed25519_of(pseudonym)
        if holder is None:
            return "bad_token"
        try:
            holder.verify(b64d(proof), proof_input(message))
        except (InvalidSignature, ValueError):
            return "bad_proof"
        cache_key = (period, pseudonym, token)
        if cache_key in self._ok:
            self._ok.move_to_end(cache_key)
            return None
        try:
            sig = b64d(token)
            msg = token_input(period, pseudonym)
        except (ValueError, UnicodeEncodeError):
            return "bad_token"
        if not verify(pk, msg, sig, VARIANT):
            return "bad_token"
        self._ok[cache_key] = None
        if len(self._ok) > 4096:
            self._ok.popitem(last=False)
        return None


@dataclass(slots=True)
class _Pending:
    period: int
    pseudonym: str
    inv: int
    key: rsa.RSAPublicKey
    topic: str
    deadline: float


class TokenWallet:
    """A device's pseudonyms (one Ed25519 key pair per period, from the OS CSPRNG), its tokens
    and the issuance in flight.

    :meth:`begin` blinds ``token_input(period, pseudonym)`` for a request; :meth:`complete`
    unblinds and verifies the issuer's answer; :meth:`sign` adds period, token and proof to an
    outgoing request or reply. Only the previous, current and next periods are kept.
    """

    def __init__(self) -> None:
        self._keys: dict[int, tuple[str, ed25519.Ed25519PrivateKey]] = {}
        self._tokens: dict[int, str] = {}
        self.pending: dict[str, _Pending] = {}
        """Issuance in flight by correlation id."""
        self.refused: set[int] = set()
        """Periods the issuer refused (rate limit): not asked again."""

    def pseudonym(self, period: int) -> str:
        """The pseudonym of ``period`` (its key pair is drawn on first use)."""
        entry = self._keys.get(period)
        if entry is None:
            sk = ed25519.Ed25519PrivateKey.generate()
            raw = sk.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
            entry = (f"k{b64e(raw)}", sk)
            self._keys[period] = entry
            for p in [p for p in self._keys if p < period - 1]:
                del self._keys[p]
            for p in [p for p in self._tokens if p < period - 1]:
                del self._tokens[p]
            self.refused = {p for p in self.refused if p >= period - 1}
        return entry[0]

    def owns(self, pseudonym: str) -> bool:
        """True for one of this device's own recent pseudonyms."""
        return any(name == pseudonym for name, _ in self._keys.values())

    def token(self, period: int) -> str | None:
        """The token certifying :meth:`pseudonym` of ``period``, if issued."""
        return self._tokens.get(period)

    def sign(self, message: PeerRequest | PeerReply, period: int) -> PeerRequest | PeerReply:
        """``message`` (sent under :meth:`pseudonym` of ``period``) with period, token and
        proof, or unchanged without a token."""
        token = self._tokens.get(period)
        if token is None:
            return message
        stamped = message.model_copy(update={"period": period, "token": token})
        proof = self._keys[period][1].sign(proof_input(stamped))
        return stamped.model_copy(update={"proof": b64e(proof)})

    def sign_as(self, message: PeerRequest | PeerReply) -> PeerRequest | PeerReply:
        """``message`` with the proof of its own ``period``'s key and whatever token it
        carries (tests and attack simulations: a key's holder signing a chosen token)."""
        period = message.period if message.period is not None else 0
        self.pseudonym(period)
        proof = self._keys[period][1].sign(proof_input(message))
        return message.model_copy(update={"proof": b64e(proof)})

    def forget(self, period: int) -> None:
        """Drop the token of ``period`` (its issuer key was replaced) and any refusal."""
        self._tokens.pop(period, None)
        self.refused.discard(period)

    def wanted(self, period: int) -> bool:
        """Neither a token nor a request in flight for ``period``, nor a refusal."""
        return (
            period not in self._tokens
            and period not in self.refused
            and all(p.period != period for p in self.pending.values())
        )

    def begin(
        self, period: int, key: rsa.RSAPublicKey, cid: str, topic: str, deadline: float
    ) -> str:
        """Blind the token input of ``period``'s pseudonym for ``key``; the blinded message
        (base64url) for an issue request with correlation id ``cid`` answered on ``topic``."""
        pseudonym = self.pseudonym(period)
        blinded, inv = blind(key, token_input(period, pseudonym), VARIANT)
        self.pending[cid] = _Pending(period, pseudonym, inv, key, topic, deadline)
        return b64e(blinded)

    def complete(self, cid: str, blind_sig: str) -> bool:
        """Unblind and verify the answer to ``cid``; True when a token was stored."""
        p = self.pending.pop(cid, None)
        if p is None:
            return False
        try:
            sig = finalize(
                p.key, token_input(p.period, p.pseudonym), b64d(blind_sig), p.inv, VARIANT
            )
        except (BlindRSAError, ValueError):
            return False
        entry = self._keys.get(p.period)
        if entry is not None and entry[0] == p.pseudonym:
            self._tokens[p.period] = b64e(sig)
            return True
        return False
