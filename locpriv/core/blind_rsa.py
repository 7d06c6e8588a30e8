"""RSA blind signatures exactly as RFC 9474 specifies (RSABSSA-SHA384-PSS-*), sans-I/O.

Assembled from :mod:`cryptography`'s primitives: RSA keys and their numbers, SHA-384, and its
RSASSA-PSS verification; the blinding arithmetic is the RFC's (raw RSA through the key's
numbers and :func:`pow`). Checked against the RFC's Appendix A test vectors
(``tests/data/rfc9474_vectors.json``, ``tests/test_blind_rsa.py``).

Variants (RFC 9474 §5): SHA-384, MGF1-SHA-384, salt length 48 bytes (``PSS``) or 0
(``PSSZERO``); ``Randomized`` prepends 32 random bytes to the message (``prepare``), while
``Deterministic`` signs it as it is. The protocol (§4):

* client: ``prepared = prepare(msg)``; ``blinded, inv = blind(pk, prepared)``;
* server: ``blind_sig = blind_sign(sk, blinded)`` (learns nothing about ``prepared``);
* client: ``sig = finalize(pk, prepared, blind_sig, inv)`` (verifies it);
* anyone: ``verify(pk, prepared, sig)``.

Unlinkability: the server's view (``blinded``) is independent of ``(prepared, sig)`` because
``r`` is uniform in ``Z_n*`` (RFC 9474 §7.3). Errors raise :class:`BlindRSAError`.
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass
from typing import Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

__all__ = [
    "PSSZERO_DETERMINISTIC",
    "PSSZERO_RANDOMIZED",
    "PSS_DETERMINISTIC",
    "PSS_RANDOMIZED",
    "BlindRSAError",
    "Variant",
    "blind",
    "blind_sign",
    "finalize",
    "prepare",
    "verify",
]

_HASH_LEN: Final = 48
"""SHA-384 output, bytes."""


class BlindRSAError(ValueError):
    """A blind-signature step failed (the RFC's "raise" cases)."""


@dataclass(frozen=True, slots=True)
class Variant:
    """One RFC 9474 variant: salt length (bytes) and whether ``prepare`` randomizes."""

    name: str
    salt_len: int
    randomized: bool


PSS_RANDOMIZED: Final = Variant("RSABSSA-SHA384-PSS-Randomized", _HASH_LEN, True)
PSSZERO_RANDOMIZED: Final = Variant("RSABSSA-SHA384-PSSZERO-Randomized", 0, True)
PSS_DETERMINISTIC: Final = Variant("RSABSSA-SHA384-PSS-Deterministic", _HASH_LEN, False)
PSSZERO_DETERMINISTIC: Final = Variant("RSABSSA-SHA384-PSSZERO-Deterministic", 0, False)


def _sha384(data: bytes) -> bytes:
    h = hashes.Hash(hashes.SHA384())
    h.update(data)
    return h.finalize()


def _mgf1(seed: bytes, length: int) -> bytes:
    """MGF1 with SHA-384 (RFC 8017 B.2.1)."""
    out = bytearray()
    counter = 0
    while len(out) < length:
        out += _sha384(seed + counter.to_bytes(4, "big"))
        counter += 1
    return bytes(out[:length])


def _modulus_len(n: int) -> int:
    return (n.bit_length() + 7) // 8


def _i2osp(x: int, length: int) -> bytes:
    if x >= 256**length:
        raise BlindRSAError("integer too large")
    return x.to_bytes(length, "big")


def _os2ip(data: bytes) -> int:
    return int.from_bytes(data, "big")


def emsa_pss_encode(msg: bytes, em_bits: int, salt: bytes) -> bytes:
    """EMSA-PSS-ENCODE (RFC 8017 §9.1.1) with SHA-384 and MGF1-SHA-384 and the given salt."""
    m_hash = _sha384(msg)
    em_len = (em_bits + 7) // 8
    s_len = len(salt)
    if em_len < _HASH_LEN + s_len + 2:
        raise BlindRSAError("encoding error: modulus too small")
    h = _sha384(b"\x00" * 8 + m_hash + salt)
    ps = b"\x00" * (em_len - s_len - _HASH_LEN - 2)
    db = ps + b"\x01" + salt
    mask = _mgf1(h, em_len - _HASH_LEN - 1)
    masked = bytearray(a ^ b for a, b in zip(db, mask, strict=True))
    masked[0] &= 0xFF >> (8 * em_len - em_bits)
    return bytes(masked) + h + b"\xbc"


def prepare(variant: Variant, msg: bytes, *, msg_prefix: bytes | None = None) -> bytes:
    """Prepare (RFC 9474 §4.1): ``msg_prefix || msg`` with 32 random bytes for Randomized
    variants, ``msg`` for Deterministic ones. ``msg_prefix`` is for test vectors only."""
    if not variant.randomized:
        return msg
    prefix = secrets.token_bytes(32) if msg_prefix is None else msg_prefix
    if len(prefix) != 32:
        raise BlindRSAError("msg_prefix must be 32 bytes")
    return prefix + msg


def blind(
    pk: rsa.RSAPublicKey,
    prepared: bytes,
    variant: Variant,
    *,
    salt: bytes | None = None,
    r: int | None = None,
) -> tuple[bytes, int]:
    """Blind (RFC 9474 §4.2): ``(blinded_msg, inv)``; keep ``inv`` secret for
    :func:`finalize`. ``salt`` and ``r`` are drawn from the OS CSPRNG unless given (test
    vectors only)."""
    numbers = pk.public_numbers()
    n, e = numbers.n, numbers.e
    if salt is None:
        salt = secrets.token_bytes(variant.salt_len)
    if len(salt) != variant.salt_len:
        raise BlindRSAError("salt length does not match the variant")
    encoded = emsa_pss_encode(prepared, n.bit_length() - 1, salt)
    m = _os2ip(encoded)
    if math.gcd(m, n) != 1:
        raise BlindRSAError("invalid input: message not co-prime with n")
    if r is None:
        r = 1 + secrets.randbelow(n - 1)  # uniform in [1, n)
    try:
        inv = pow(r, -1, n)
    except ValueError as exc:
        raise BlindRSAError("invalid blind: r not invertible mod n") from exc
    x = pow(r, e, n)  # RSAVP1(pk, r)
    z = (m * x) % n
    return _i2osp(z, _modulus_len(n)), inv


def blind_sign(sk: rsa.RSAPrivateKey, blinded_msg: bytes) -> bytes:
    """BlindSign (RFC 9474 §4.3): the signer's side; checks its result (§4.3 step 3)."""
    priv = sk.private_numbers()
    pub = priv.public_numbers
    n, e = pub.n, pub.e
    k = _modulus_len(n)
    if len(blinded_msg) != k:
        raise BlindRSAError("blinded message of the wrong length")
    m = _os2ip(blinded_msg)
    if m >= n:
        raise BlindRSAError("message representative out of range")
    # RSASP1 through the CRT (RFC 8017 §5.2.1, second form)
    s1 = pow(m, priv.dmp1, priv.p)
    s2 = pow(m, priv.dmq1, priv.q)
    h = (priv.iqmp * (s1 - s2)) % priv.p
    s = s2 + priv.q * h
    if pow(s, e, n) != m:
        raise BlindRSAError("signing failure")
    return _i2osp(s, k)


def verify(pk: rsa.RSAPublicKey, prepared: bytes, sig: bytes, variant: Variant) -> bool:
    """RSASSA-PSS-VERIFY (RFC 8017 §8.1.2) of ``sig`` over ``prepared`` with the variant's
    salt length, by :mod:`cryptography`."""
    if len(sig) != _modulus_len(pk.public_numbers().n):
        return False
    try:
        pk.verify(
            sig,
            prepared,
            padding.PSS(mgf=padding.MGF1(hashes.SHA384()), salt_length=variant.salt_len),
            hashes.SHA384(),
        )
    except InvalidSignature:
        return False
    return True


def finalize(
    pk: rsa.RSAPublicKey, prepared: bytes, blind_sig: bytes, inv: int, variant: Variant
) -> bytes:
    """Finalize (RFC 9474 §4.4): unblind and verify; the signature, or :class:`BlindRSAError`."""
    n = pk.public_numbers().n
    k = _modulus_len(n)
    if len(blind_sig) != k:
        raise BlindRSAError("unexpected input size")
    s = (_os2ip(blind_sig) * inv) % n
    sig = _i2osp(s, k)
    if not verify(pk, prepared, sig, variant):
        raise BlindRSAError("invalid signature")
    return sig
