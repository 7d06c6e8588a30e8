"""RFC 9474 blind RSA signatures: the RFC's Appendix A test vectors, and the protocol's
properties (round trip, tampering, what the signer sees)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from locpriv.core.blind_rsa import (
    PSS_DETERMINISTIC,
    PSS_RANDOMIZED,
    PSSZERO_DETERMINISTIC,
    PSSZERO_RANDOMIZED,
    BlindRSAError,
    Variant,
    blind,
    blind_sign,
    emsa_pss_encode,
    finalize,
    prepare,
    verify,
)

VECTORS: list[dict[str, Any]] = json.loads(
    (Path(__file__).parent / "data" / "rfc9474_vectors.json").read_text()
)["vectors"]
ALL = (PSS_RANDOMIZED, PSSZERO_RANDOMIZED, PSS_DETERMINISTIC, PSSZERO_DETERMINISTIC)
VARIANTS = {v.name: v for v in ALL}


def _key(v: dict[str, Any]) -> rsa.RSAPrivateKey:
    p, q, d, e, n = (int(v[x], 16) for x in ("p", "q", "d", "e", "n"))
    assert p * q == n
    pub = rsa.RSAPublicNumbers(e, n)
    return rsa.RSAPrivateNumbers(
        p, q, d, rsa.rsa_crt_dmp1(d, p), rsa.rsa_crt_dmq1(d, q), rsa.rsa_crt_iqmp(p, q), pub
    ).private_key()


def test_all_four_variants_have_vectors() -> None:
    assert sorted(v["name"] for v in VECTORS) == sorted(VARIANTS)


@pytest.mark.parametrize("v", VECTORS, ids=[v["name"] for v in VECTORS])
def test_rfc9474_appendix_a_vectors(v: dict[str, Any]) -> None:
    variant = VARIANTS[v["name"]]
    sk = _key(v)
    pk = sk.public_key()
    n = pk.public_numbers().n
    msg = bytes.fromhex(v["msg"])
    prefix = bytes.fromhex(v["msg_prefix"]) if variant.randomized else None
    prepared = prepare(variant, msg, msg_prefix=prefix)
    assert prepared.hex() == v["prepared_msg"]
    salt = bytes.fromhex(v["salt"])
    if "encoded_msg" in v:
        assert emsa_pss_encode(prepared, n.bit_length() - 1, salt).hex() == v["encoded_msg"]
    inv = int(v["inv"], 16)
    r = pow(inv, -1, n)
    blinded, got_inv = blind(pk, prepared, variant, salt=salt, r=r)
    assert got_inv == inv
    assert blinded.hex() == v["blinded_msg"]
    blind_sig = blind_sign(sk, blinded)
    assert blind_sig.hex() == v["blind_sig"]
    sig = finalize(pk, prepared, blind_sig, inv, variant)
    assert sig.hex() == v["sig"]
    assert verify(pk, prepared, sig, variant)


@pytest.fixture(scope="module")
def key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.mark.parametrize("variant", list(VARIANTS.values()), ids=list(VARIANTS))
def test_round_trip_with_fresh_randomness(key: rsa.RSAPrivateKey, variant: Variant) -> None:
    pk = key.public_key()
    prepared = prepare(variant, b"period 7 pseudonym p0123")
    blinded, inv = blind(pk, prepared, variant)
    sig = finalize(pk, prepared, blind_sign(key, blinded), inv, variant)
    assert verify(pk, prepared, sig, variant)
    assert not verify(pk, prepared + b"x", sig, variant)
    bad = bytes([sig[0] ^ 1]) + sig[1:]
    assert not verify(pk, prepared, bad, variant)
    assert not verify(pk, prepared, sig[1:], variant)


def test_signer_sees_unlinkable_blinded_messages(key: rsa.RSAPrivateKey) -> None:
    """Two blindings of one message differ, and neither equals the message's encoding."""
    pk = key.public_key()
    prepared = prepare(PSS_DETERMINISTIC, b"same message")
    b1, _ = blind(pk, prepared, PSS_DETERMINISTIC)
    b2, _ = blind(pk, prepared, PSS_DETERMINISTIC)
    assert b1 != b2
    assert prepared not in b1 and prepared not in b2


def test_finalize_rejects_a_wrong_signature(key: rsa.RSAPrivateKey) -> None:
    pk = key.public_key()
    prepared = prepare(PSS_DETERMINISTIC, b"m")
    _blinded, inv = blind(pk, prepared, PSS_DETERMINISTIC)
    other, _ = blind(pk, prepare(PSS_DETERMINISTIC, b"other"), PSS_DETERMINISTIC)
    with pytest.raises(BlindRSAError):
        finalize(pk, prepared, blind_sign(key, other), inv, PSS_DETERMINISTIC)
    with pytest.raises(BlindRSAError):
        finalize(pk, prepared, b"\x00" * 10, inv, PSS_DETERMINISTIC)
    with pytest.raises(BlindRSAError):
        blind_sign(key, b"\xff" * 256)  # >= n
    with pytest.raises(BlindRSAError):
        blind_sign(key, b"\x01" * 10)
