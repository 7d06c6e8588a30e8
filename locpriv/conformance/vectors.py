"""Loading the conformance vectors and filling in their placeholders (pure, no I/O but reads).

Vectors are JSON files shipped as package data (``locpriv/conformance/vectors``), written by
``scripts/make_vectors.py`` with pyproj and exact arithmetic, independently of locpriv's own
geometry. Message vectors hold placeholders (``{user}``, ``{other_user}``, ``{reply_to}``,
``{tile}``, ``{wrong_tile}``) that :func:`fill` replaces for one deployment and sender.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

VECTORS_DIR: Final = Path(__file__).resolve().parent / "vectors"
"""Where the vector files live."""

__all__ = ["VECTORS_DIR", "MessageCase", "Placeholders", "fill", "load", "message_cases"]


def load(name: str) -> dict[str, Any]:
    """The parsed vector file ``name`` (``tiles``, ``areas`` or ``messages``)."""
    data: dict[str, Any] = json.loads((VECTORS_DIR / f"{name}.json").read_text())
    return data


@dataclass(frozen=True, slots=True)
class Placeholders:
    """What the message vectors' placeholders stand for in one deployment."""

    user: str
    other_user: str
    reply_to: str
    tile: str
    wrong_tile: str

    def mapping(self) -> dict[str, str]:
        """``{"{user}": ..., ...}``."""
        return {
            "{user}": self.user,
            "{other_user}": self.other_user,
            "{reply_to}": self.reply_to,
            "{tile}": self.tile,
            "{wrong_tile}": self.wrong_tile,
        }


def fill(text: str, values: Placeholders) -> str:
    """``text`` with every placeholder replaced."""
    for key, value in values.mapping().items():
        text = text.replace(key, value)
    return text


@dataclass(frozen=True, slots=True)
class MessageCase:
    """One message vector filled in: publish ``payload`` on ``{root}/{topic}``."""

    name: str
    topic: str
    payload: bytes
    valid: bool
    code: str | None
    field: str | None
    to: str
    details: tuple[str, ...]
    details_tile: str | None
    service: str = "anonymizer"
    """The service that reads ``topic`` (``anonymizer`` or ``ds``): errors that cannot reach
    ``reply_to`` go to ``errors/<service>``."""


def message_cases(values: Placeholders) -> list[MessageCase]:
    """Every case of ``messages.json`` with ``values`` filled in."""
    out = []
    for case in load("messages")["cases"]:
        if "payload" in case:
            raw = json.dumps(case["payload"], separators=(",", ":"))
        else:
            raw = case["payload_text"]
        expect = case["expect"]
        tile = expect.get("details_tile")
        out.append(
            MessageCase(
                name=case["name"],
                topic=fill(case["topic"], values),
                payload=fill(raw, values).encode(),
                valid=bool(expect.get("valid", False)),
                code=expect.get("code"),
                field=expect.get("field"),
                to=expect.get("to", "reply"),
                details=tuple(expect.get("details", ())),
                details_tile=None if tile is None else fill(tile, values),
                service=case.get("service", "anonymizer"),
            )
        )
    return out
