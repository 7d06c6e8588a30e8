"""``locpriv conformance --broker URL``: check a live deployment against the wire protocol.

Runs :func:`locpriv.conformance.live.run_conformance` and prints its pass/fail table; exits 1
when a step failed, naming it. Users: ``--user NAME`` (repeatable; the first one sends the test
vectors, the others populate the cloaks and act as Protocol 4 devices). Passwords never come
from the command line: ``--password-file FILE`` holds either one password (for every user) or
``name:password`` lines; else ``$LOCPRIV_PASSWORD`` (every user); else none (the embedded demo
broker takes anonymous clients).
"""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from locpriv.errors import ConfigError
from locpriv.wire.topics import DEFAULT_PREFIX

__all__ = ["PASSWORD_ENV", "read_passwords", "register"]

PASSWORD_ENV = "LOCPRIV_PASSWORD"
"""Environment variable holding the users' password (when no ``--password-file``)."""


def read_passwords(users: list[str], password_file: Path | None) -> list[tuple[str, str | None]]:
    """``(user, password)`` for each of ``users`` (see the module docstring)."""
    if password_file is None:
        env = os.environ.get(PASSWORD_ENV) or None
        return [(u, env) for u in users]
    try:
        lines = [ln.strip() for ln in password_file.read_text(encoding="utf-8").splitlines()]
    except OSError as exc:
        raise ConfigError(f"cannot read the password file {password_file}: {exc}") from None
    lines = [ln for ln in lines if ln]
    if not lines:
        raise ConfigError(f"the password file {password_file} is empty")
    by_user = dict(ln.split(":", 1) for ln in lines if ":" in ln)
    if not by_user:
        return [(u, lines[0]) for u in users]
    missing = [u for u in users if u not in by_user]
    if missing:
        raise ConfigError(f"no password for {', '.join(missing)} in {password_file}")
    return [(u, by_user[u]) for u in users]


def _run(args: Any) -> int:
    from locpriv.conformance.live import format_table, run_conformance

    if urlsplit(args.broker).password:
        raise ConfigError("the --broker URL carries a password: use --password-file or $%s")
    users = args.user or ["conformance"]
    steps = asyncio.run(
        run_conformance(
            args.broker,
            read_passwords(users, args.password_file),
            ca_file=args.ca_file,
            prefix=args.prefix,
            timeout_s=args.timeout,
            check_error_topic=args.check_error_topic,
        )
    )
    print(format_table(steps), flush=True)
    failed = [s.name for s in steps if s.outcome == "FAIL"]
    if failed:
        print(f"FAILED: {', '.join(failed)}", flush=True)
        return 1
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``locpriv conformance``."""
    p = subparsers.add_parser(
        "conformance", help="check a live deployment against the wire protocol's contract"
    )
    p.add_argument("--broker", required=True, help="broker URL (mqtt:// or mqtts://HOST:PORT)")
    p.add_argument(
        "--user", action="append", help="user name (repeat; 4 users exercise P1, P3 and P4 fully)"
    )
    p.add_argument(
        "--password-file",
        type=Path,
        help=f"one password, or name:password lines (else ${PASSWORD_ENV})",
    )
    p.add_argument("--ca-file", help="CA certificate (PEM) that verifies an mqtts broker")
    p.add_argument("--prefix", default=DEFAULT_PREFIX, help="topic prefix (locpriv)")
    p.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for each reply")
    p.add_argument(
        "--check-error-topic",
        action="store_true",
        help="also check errors answered on errors/anonymizer (needs a login that reads it)",
    )
    p.set_defaults(func=_run)
