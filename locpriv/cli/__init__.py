"""The ``locpriv`` command line. The only place that configures logging.

Each command lives in its own module: the built-in ones are listed in :data:`COMMAND_MODULES`,
others are found through the ``locpriv.commands`` entry-point group (the ``demo`` command comes
from the ``simulators`` package that way, so the library never imports the simulators). A
module defines ``register(subparsers)`` that adds its sub-parser and sets ``func(args) -> int``.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points
from typing import Any

from locpriv import __version__
from locpriv.errors import LocprivError

COMMAND_MODULES: tuple[str, ...] = (
    "locpriv.cli.schemas",
    "locpriv.tabular.io.cli",
    "locpriv.tabular.io.assess_cli",
    "locpriv.cli.serve",
    "locpriv.cli.conformance",
)
ENTRY_POINT_GROUP = "locpriv.commands"
"""Entry-point group of further command modules (``name = "package.module"``)."""


def _command_modules() -> list[Any]:
    modules = [importlib.import_module(name) for name in COMMAND_MODULES]
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        modules.append(ep.load())
    return modules


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every registered command."""
    parser = argparse.ArgumentParser(
        prog="locpriv",
        description="Location privacy over MQTT and p-sensitive k-anonymity of microdata.",
    )
    parser.add_argument("--version", action="version", version=f"locpriv {__version__}")
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="more logging (-v info, -vv debug)"
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="only warnings and errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in _command_modules():
        module.register(sub)
    return parser


def configure_logging(verbose: int, quiet: bool) -> None:
    """Log to stderr; ``LOCPRIV_LOG`` (a level name) overrides the flags."""
    level = (
        logging.WARNING if quiet else (logging.INFO, logging.INFO, logging.DEBUG)[min(verbose, 2)]
    )
    env = os.environ.get("LOCPRIV_LOG")
    if env:
        level = logging.getLevelNamesMapping().get(env.upper(), level)
    logging.basicConfig(
        level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    if level > logging.DEBUG:
        # Third-party MQTT stacks log payloads and client ids at INFO: keep them quiet.
        for noisy in ("amqtt", "transitions", "paho", "aiomqtt"):
            logging.getLogger(noisy).setLevel(logging.WARNING)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``locpriv`` console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(args.verbose, args.quiet)
    try:
        status: int = args.func(args)
    except LocprivError as exc:
        print(f"locpriv {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
