"""Shared fixtures: real MQTT brokers started per test (pytest-asyncio strict mode).

Fixtures
--------
``amqtt_broker`` (async, function scope)
    A started :class:`locpriv.service.broker.EmbeddedBroker` (amqtt 0.12, MQTT 3.1.1) on a free port
    of 127.0.0.1. ``amqtt_url`` is its ``mqtt://127.0.0.1:<port>``.
``mosquitto`` (sync, function scope)
    A started :class:`locpriv.service.broker.MosquittoProcess` (Debian's ``/usr/sbin/mosquitto``
    2.0 with
    a generated config in ``tmp_path``) on a free port; ``.stop()`` / ``.start()`` restart it on
    the same port (outage tests). ``mosquitto_url`` is its URL. If the binary is missing the
    test FAILS when the environment variable ``CI`` is set and is skipped otherwise.
``broker_url`` (async, function scope, parametrised ``amqtt`` / ``mosquitto``)
    Runs a test once on each broker; the mosquitto case carries the ``mosquitto`` marker.
``topics``
    A :class:`locpriv.wire.topics.Topics` with a unique prefix per test, so tests never see each
    other's messages even on a shared broker.

Async tests need ``@pytest.mark.asyncio``; network tests should also carry
``@pytest.mark.integration`` and ``@pytest.mark.timeout(60)``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from locpriv.service.broker import MOSQUITTO_BIN, EmbeddedBroker, MosquittoProcess
from locpriv.wire.topics import Topics


def _require_mosquitto() -> None:
    if os.access(MOSQUITTO_BIN, os.X_OK):
        return
    message = f"mosquitto binary not found at {MOSQUITTO_BIN} (apt-get install mosquitto)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest_asyncio.fixture
async def amqtt_broker() -> AsyncIterator[EmbeddedBroker]:
    """An embedded amqtt broker on a free port, stopped after the test."""
    async with EmbeddedBroker() as broker:
        yield broker


@pytest.fixture
def amqtt_url(amqtt_broker: EmbeddedBroker) -> str:
    """URL of the per-test embedded amqtt broker."""
    return amqtt_broker.url


@pytest.fixture
def mosquitto(tmp_path: Path) -> Iterator[MosquittoProcess]:
    """A private mosquitto on a free port, killed after the test."""
    _require_mosquitto()
    proc = MosquittoProcess(str(tmp_path))
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def mosquitto_url(mosquitto: MosquittoProcess) -> str:
    """URL of the per-test mosquitto."""
    return mosquitto.url


@pytest_asyncio.fixture(
    params=[
        pytest.param("amqtt", id="amqtt"),
        pytest.param("mosquitto", id="mosquitto", marks=pytest.mark.mosquitto),
    ]
)
async def broker_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """The URL of a fresh broker: once embedded amqtt, once mosquitto."""
    if request.param == "amqtt":
        async with EmbeddedBroker() as broker:
            yield broker.url
        return
    _require_mosquitto()
    proc = MosquittoProcess(str(tmp_path))
    proc.start()
    try:
        yield proc.url
    finally:
        proc.stop()


@pytest.fixture
def topics() -> Topics:
    """Topics under a prefix unique to this test."""
    return Topics(f"t{uuid.uuid4().hex[:10]}")
