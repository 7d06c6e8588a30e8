"""``locpriv serve [anonymizer|ds|all|issuer]``: run the trusted services.

Without ``--broker`` an embedded amqtt broker is started in-process on ``--listen`` (default
``127.0.0.1:0``, a free port) and its URL is printed. SIGTERM and SIGINT shut down cleanly:
pending requests are answered ``unavailable``, the retained status goes ``offline``.

Credentials: the broker URL carries at most the user name (``mqtts://locpriv-ds@host:8883``);
the password comes from ``--password-file FILE`` (its first line) or the environment variable
``LOCPRIV_BROKER_PASSWORD``, so that it never shows in the process list. URLs are printed and
logged with any password replaced by ``***``. ``--ca-file`` (or ``[mqtt] ca_file``) verifies a
TLS broker's certificate and host name.

Scaling out: ``--shard I/N`` runs shard I of N anonymizer processes, each serving the tiles
(``[tiles] side_m``) rendezvous hashing gives it; no ``$share`` needed, any MQTT 3.1.1 broker.
``--metrics-port P`` serves Prometheus metrics on ``http://127.0.0.1:P/metrics`` (``serve all``:
the anonymizer on P, DS on P+1; 0: free ports, printed).

``serve issuer --key-dir DIR`` runs the Protocol 4 token issuer (docs/peer.md §8): one RSA key
per pseudonym period (``--period-s``, equal to the devices' ``pseudonym_ttl_s``) in DIR, at most
``--per-login`` tokens per login and period.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from locpriv.config import load_config
from locpriv.core.poi import DEFAULT_POIS
from locpriv.core.tiles import Shard
from locpriv.errors import ConfigError
from locpriv.service.anonymizer import AnonymizerService
from locpriv.service.broker import EmbeddedBroker
from locpriv.service.driver import ServiceDriver
from locpriv.service.ds import DSService
from locpriv.service.issuer import IssuerService
from locpriv.transport import redact_url

__all__ = ["PASSWORD_ENV", "read_password", "register", "serve"]

log = logging.getLogger(__name__)

PASSWORD_ENV = "LOCPRIV_BROKER_PASSWORD"
"""Environment variable holding the broker password (when no ``--password-file``)."""


def read_password(password_file: Path | None) -> str | None:
    """The broker password: the first line of ``password_file``, else ``$LOCPRIV_BROKER_PASSWORD``,
    else None. Raises ConfigError (naming the file, never its content) when it cannot be read."""
    if password_file is not None:
        try:
            text = password_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read the password file {password_file}: {exc}") from None
        lines = text.splitlines()
        if not lines or not lines[0]:
            raise ConfigError(f"the password file {password_file} is empty")
        return lines[0]
    return os.environ.get(PASSWORD_ENV) or None


async def serve(
    what: str,
    *,
    broker: str | None,
    listen: str = "127.0.0.1:0",
    pois: Path | None = None,
    config_file: Path | None = None,
    stop: asyncio.Event | None = None,
    password: str | None = None,
    ca_file: str | None = None,
    shard: Shard | None = None,
    metrics_port: int | None = None,
    metrics_addr: str = "127.0.0.1",
    key_dir: Path | None = None,
    period_s: float = 3600.0,
    per_login: int = 2,
) -> None:
    """Run ``what`` (``anonymizer``, ``ds`` or ``all``) until ``stop`` is set or a signal;
    ``password`` and ``ca_file`` (else ``[mqtt] ca_file``) are used for the broker; ``shard``
    is the anonymizer's share of the tiles; ``metrics_port`` serves Prometheus metrics."""
    config = load_config(config_file)
    if ca_file:
        config = config.model_copy(
            update={"mqtt": config.mqtt.model_copy(update={"ca_file": ca_file})}
        )
    if broker is not None and urlsplit(broker).password and password is None:
        log.warning(
            "the --broker URL carries a password, which every local user can read in the"
            " process list: use --password-file or $%s",
            PASSWORD_ENV,
        )
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

        def metrics(offset: int) -> dict[str, Any]:
            if metrics_port is None:
                return {}
            port = metrics_port + offset if metrics_port else 0
            return {"metrics_port": port, "metrics_addr": metrics_addr}

        if what in ("anonymizer", "all"):
            services.append(
                AnonymizerService(url, config, password=password, shard=shard, **metrics(0))
            )
        if what in ("ds", "all"):
            ds = DSService(url, config, pois=pois or DEFAULT_POIS, password=password, **metrics(1))
            services.insert(0, ds)
        if what == "issuer":
            if key_dir is None:
                raise ConfigError("serve issuer needs --key-dir")
            issuer = IssuerService(
                url,
                config,
                key_dir=key_dir,
                period_s=period_s,
                per_login=per_login,
                password=password,
                **metrics(0),
            )
            services.append(issuer)
        tasks = [asyncio.create_task(s.run(), name=s.name) for s in services]
        for s in services:
            ready = asyncio.create_task(s.ready.wait())
            await asyncio.wait([ready, *tasks], return_when=asyncio.FIRST_COMPLETED)
            ready.cancel()
            for t in tasks:
                if t.done():
                    t.result()  # a service that failed to start raises here
        for s in services:
            if s.metrics is not None:
                print(f"metrics of {s.status_name}: http://{metrics_addr}:{s.metrics_port}/metrics")
        names = ", ".join(s.status_name for s in services)
        print(f"serving {names} on {redact_url(url)}", flush=True)
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
            password=read_password(args.password_file),
            ca_file=args.ca_file,
            shard=args.shard,
            metrics_port=args.metrics_port,
            metrics_addr=args.metrics_addr,
            key_dir=args.key_dir,
            period_s=args.period_s,
            per_login=args.per_login,
        )
    )
    print("stopped", file=sys.stderr, flush=True)
    return 0


def _shard(text: str) -> Shard:
    try:
        return Shard.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``locpriv serve``."""
    p = subparsers.add_parser(
        "serve",
        help="run the anonymizer/mediator (P1-P3) and/or the database server",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("what", nargs="?", choices=("anonymizer", "ds", "all", "issuer"), default="all")
    p.add_argument(
        "--broker",
        help="mqtt://[user@]host:port or mqtts://... (default: start an embedded amqtt broker)",
    )
    p.add_argument(
        "--password-file",
        type=Path,
        help=f"file whose first line is the broker password (else ${PASSWORD_ENV})",
    )
    p.add_argument("--ca-file", help="CA certificates (PEM) to verify an mqtts:// broker with")
    p.add_argument(
        "--listen", default="127.0.0.1:0", help="embedded broker address (port 0: a free port)"
    )
    p.add_argument("--pois", type=Path, help="POIs for DS, CSV or GeoJSON (default: demo set)")
    p.add_argument("--config", type=Path, help="service configuration TOML")
    p.add_argument(
        "--shard",
        type=_shard,
        help="I/N: serve shard I of N (the tiles rendezvous hashing gives it); needs tiles",
    )
    p.add_argument(
        "--metrics-port", type=int, help="serve Prometheus metrics on this port (0: a free one)"
    )
    p.add_argument("--metrics-addr", default="127.0.0.1", help="address of the metrics endpoint")
    p.add_argument("--key-dir", type=Path, help="issuer: directory of its period keys")
    p.add_argument(
        "--period-s", type=float, default=3600.0, help="issuer: pseudonym period, seconds"
    )
    p.add_argument("--per-login", type=int, default=2, help="issuer: tokens per login and period")
    p.set_defaults(func=_run)
