"""Export the JSON Schemas of the wire messages (``locpriv schemas``) and check them."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from locpriv.messages import json_schemas

DEFAULT_DIR = Path("docs/schemas")


def render() -> dict[str, str]:
    """File name -> JSON text of every schema, deterministic (sorted keys, trailing newline)."""
    return {
        f"{name}.schema.json": json.dumps(schema, indent=2, sort_keys=True) + "\n"
        for name, schema in json_schemas().items()
    }


def export(directory: Path) -> list[Path]:
    """Write every schema into ``directory`` (created), removing stale schema files."""
    directory.mkdir(parents=True, exist_ok=True)
    files = render()
    for stale in directory.glob("*.schema.json"):
        if stale.name not in files:
            stale.unlink()
    written = []
    for name, text in files.items():
        path = directory / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def diff(directory: Path) -> list[str]:
    """Names of schema files in ``directory`` that are missing, stale or differ from the models."""
    files = render()
    problems = [n for n, text in files.items() if _read(directory / n) != text]
    problems += [p.name for p in directory.glob("*.schema.json") if p.name not in files]
    return sorted(problems)


def _read(path: Path) -> str | None:
    return path.read_text(encoding="utf-8") if path.exists() else None


def _run(args: Any) -> int:
    directory: Path = args.out
    if args.check:
        problems = diff(directory)
        if problems:
            print(f"schemas differ from the models: {', '.join(problems)}")
            return 1
        print(f"{directory}: up to date")
        return 0
    for path in export(directory):
        print(path)
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``locpriv schemas``."""
    p = subparsers.add_parser("schemas", help="export the wire messages' JSON Schemas")
    p.add_argument("--out", type=Path, default=DEFAULT_DIR, help="directory (docs/schemas)")
    p.add_argument("--check", action="store_true", help="only check that the files are current")
    p.set_defaults(func=_run)
