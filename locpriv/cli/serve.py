"""``locpriv serve [anonymizer|ds|all]``: run the trusted services.

Without ``--broker`` an embedded amqtt broker is started in-process on ``--listen`` (default
``127.0.0.1:0``, a free port) and its URL is printed. SIGTERM and SIGINT shut down cleanly:
pending requests are answered ``unavailable``, the retained status goes ``offline``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from pathlib import Path

from locpriv.config import load_config
from locpriv.core.poi import DEFAULT_POIS
from locpriv.errors import ConfigError
from locpriv.service.anonymizer import AnonymizerService
from locpriv.service.broker import EmbeddedBroker
from locpriv.service.driver import ServiceDriver
from locpriv.service.ds import DSService
from locpriv.transport import redact_url

__all__ = ["register", "serve"]


async def serve(
    what: str,
    *,
    broker: str | None,
    listen: str = "127.0.0.1:0",
    pois: Path | None = None,
    config_file: Path | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Run ``what`` (``anonymizer``, ``ds`` or ``all``) until ``stop`` is set or a signal."""
    config = load_config(config_file)
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    async with contextlib.AsyncExitStack() as stack:
        url = broker
        if url is None:
            host, _, port = listen.rpartition(":")
            try:
                embedded = EmbeddedBroker(host=host or "127.0.0.1", port=int(port or 0))
            except ValueError as exc:
                raise ConfigError(f"bad --listen {listen!r}: {exc}") from None
            await stack.enter_async_context(embedded)
            url = embedded.url
            print(f"embedded amqtt broker: {url}", flush=True)
        services: list[ServiceDriver] = []
        if what in ("ds", "all"):
            services.append(DSService(url, config, pois=pois or DEFAULT_POIS))
        if what in ("anonymizer", "all"):
            services.append(AnonymizerService(url, config))
        tasks = [asyncio.create_task(s.run(), name=s.name) for s in services]
        for s in services:
            ready = asyncio.create_task(s.ready.wait())
            await asyncio.wait([ready, *tasks], return_when=asyncio.FIRST_COMPLETED)
            ready.cancel()
            for t in tasks:
                if t.done():
                    t.result()  # a service that failed to start raises here
        print(f"serving {', '.join(s.name for s in services)} on {redact_url(url)}", flush=True)
        stopper = asyncio.create_task(stop.wait())
        await asyncio.wait([stopper, *tasks], return_when=asyncio.FIRST_COMPLETED)
        for s in services:
            s.stop()
        stopper.cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        for r in results:
            if isinstance(r, BaseException) and not isinstance(r, asyncio.CancelledError):
                raise r
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(sig)


def _run(args: argparse.Namespace) -> int:
    asyncio.run(
        serve(
            args.what,
            broker=args.broker,
            listen=args.listen,
            pois=args.pois,
            config_file=args.config,
        )
    )
    print("stopped", file=sys.stderr, flush=True)
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``locpriv serve``."""
    p = subparsers.add_parser(
        "serve",
        help="run the anonymizer/mediator (P1-P3) and/or the database server",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("what", nargs="?", choices=("anonymizer", "ds", "all"), default="all")
    p.add_argument("--broker", help="mqtt://host:port (default: start an embedded amqtt broker)")
    p.add_argument(
        "--listen", default="127.0.0.1:0", help="embedded broker address (port 0: a free port)"
    )
    p.add_argument("--pois", type=Path, help="POIs for DS, CSV or GeoJSON (default: demo set)")
    p.add_argument("--config", type=Path, help="service configuration TOML")
    p.set_defaults(func=_run)
