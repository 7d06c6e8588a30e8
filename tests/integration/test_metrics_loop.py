"""Where a scrape reads the service's state: on the event loop that owns it, never from the
HTTP server's thread while the loop writes; and a loop too busy to answer in time gets the
previous scrape's values within the wait, not a hung scrape."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from _svc_helpers import make_config, running, seed_population

from locpriv.service import metrics as metrics_module
from locpriv.service.anonymizer import AnonymizerService
from locpriv.wire.topics import Topics
from simulators.scrape import metric, scrape, total

pytestmark = [pytest.mark.timeout(90), pytest.mark.integration, pytest.mark.asyncio]


def _watch_threads(machine: Any, seen: list[int]) -> None:
    """Record the thread of every call to the machine's state readers (then read as usual)."""
    for name in ("users_per_tile", "session_counts"):
        read = getattr(machine, name)

        def recorded(read: Any = read) -> Any:
            seen.append(threading.get_ident())
            return read()

        setattr(machine, name, recorded)


async def test_a_scrape_reads_the_machine_on_its_loop(broker_url: str, topics: Topics) -> None:
    anonymizer = AnonymizerService(broker_url, make_config(topics), metrics_port=0)
    seen: list[int] = []
    _watch_threads(anonymizer.machine, seen)
    async with running(anonymizer):
        await seed_population(broker_url, topics, n=30)
        await asyncio.sleep(0.5)
        assert anonymizer.metrics_port
        samples = await asyncio.to_thread(scrape, anonymizer.metrics_port)
        users = total(samples, "locpriv_users", service="anonymizer")
    assert users == 30  # the scrape saw the population the loop holds
    assert seen and set(seen) == {threading.get_ident()}  # this test's thread runs the loop


def _scrape_while_blocked(port: int, block_s: float) -> tuple[list[Any], float]:
    """Scrape from another thread while this thread (the services' loop) is blocked for
    ``block_s`` seconds (a long computation, say): the samples and the scrape's seconds."""
    got: dict[str, Any] = {}

    def scrape_now() -> None:
        t0 = time.monotonic()
        got["samples"] = scrape(port)
        got["seconds"] = time.monotonic() - t0

    scraper = threading.Thread(target=scrape_now)
    scraper.start()
    time.sleep(block_s)
    scraper.join(timeout=10)
    return got["samples"], got["seconds"]


async def test_a_busy_loop_gets_the_previous_values_in_time(
    broker_url: str, topics: Topics, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(metrics_module, "SCRAPE_WAIT_S", 0.5)
    anonymizer = AnonymizerService(broker_url, make_config(topics), metrics_port=0)
    async with running(anonymizer):
        port = anonymizer.metrics_port
        assert port and anonymizer.metrics is not None
        # busy before any scrape was answered: the state read when the endpoint started
        first, first_s = _scrape_while_blocked(port, 2.0)
        await seed_population(broker_url, topics, n=20)
        await asyncio.sleep(0.5)
        before = await asyncio.to_thread(scrape, port)
        busy, busy_s = _scrape_while_blocked(port, 2.0)
        late = anonymizer.metrics.state.late
        after = await asyncio.to_thread(scrape, port)  # the loop answers again
    # each busy scrape is served after the 0.5 s wait, not after the 2 s block
    assert first_s < 1.5 and busy_s < 1.5
    assert late == 2
    assert metric(first, "locpriv_queue_depth", service="anonymizer", queue="inbound") == 0
    assert total(first, "locpriv_users", service="anonymizer") == 0  # none had reported yet
    assert total(before, "locpriv_users", service="anonymizer") == 20
    assert total(busy, "locpriv_users", service="anonymizer") == 20  # the previous scrape's
    assert total(after, "locpriv_users", service="anonymizer") == 20
