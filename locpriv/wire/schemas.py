"""The JSON Schemas of the wire messages and the field tables of docs/protocol.md.

Besides ``docs/schemas/*.schema.json`` the command keeps the field tables of
``docs/protocol.md`` (between ``<!-- fields:start -->`` and ``<!-- fields:end -->``) equal to
the models, so the protocol page lists every field, type, default and bound.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from locpriv.wire import messages as m

DEFAULT_DIR = Path("docs/schemas")
PROTOCOL_DOC = Path("docs/protocol.md")
_START, _END = "<!-- fields:start -->", "<!-- fields:end -->"
_PARTS: tuple[type[BaseModel], ...] = (
    m.PrivacyProfile,
    m.NearestQuery,
    m.WithinQuery,
    m.PointLocation,
    m.RegionLocation,
    m.CentroidLocation,
    m.Region,
    m.ErrorDetails,
    m.ProfileBounds,
    m.POI,
    m.IssuerKey,
)
_BOUNDS = (
    ("minimum", ">= {}"),
    ("exclusiveMinimum", "> {}"),
    ("maximum", "<= {}"),
    ("exclusiveMaximum", "< {}"),
    ("minLength", "length >= {}"),
    ("maxLength", "length <= {}"),
    ("minItems", ">= {} items"),
    ("maxItems", "<= {} items"),
    ("pattern", "matches `{}`"),
)


def _type(prop: dict[str, Any]) -> str:
    if "const" in prop:
        return f"`{json.dumps(prop['const'])}`"
    if "enum" in prop:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in prop["enum"])
    if "$ref" in prop:
        return str(prop["$ref"]).rsplit("/", 1)[1]
    for key in ("anyOf", "oneOf"):
        if key in prop:
            return " or ".join(_type(p) for p in prop[key])
    kind = prop.get("type", "any")
    if kind == "array":
        items = prop.get("prefixItems")
        if items:
            return "[" + ", ".join(_type(p) for p in items) + "]"
        return f"array of {_type(prop.get('items', {}))}"
    if kind == "object" and "additionalProperties" in prop:
        return f"object of {_type(prop['additionalProperties'])}"
    return str(kind)


def _bounds(prop: dict[str, Any]) -> str:
    found = [fmt.format(prop[key]) for key, fmt in _BOUNDS if key in prop]
    for key in ("anyOf", "oneOf"):
        for alt in prop.get(key, []):
            found += [fmt.format(alt[k]) for k, fmt in _BOUNDS if k in alt]
    return ", ".join(found).replace("|", "\\|")


def _table(model: type[BaseModel]) -> str:
    schema = model.model_json_schema()
    required = set(schema.get("required", []))
    rows = [
        f"#### `{model.__name__}`",
        "",
        " ".join((model.__doc__ or "").split()),
        "",
        "| field | type | required / default | bounds | meaning |",
        "|---|---|---|---|---|",
    ]
    for name, prop in schema.get("properties", {}).items():
        need = "required" if name in required else f"default `{json.dumps(prop.get('default'))}`"
        desc = " ".join(str(prop.get("description", "")).split()).replace("|", "\\|")
        rows.append(f"| `{name}` | {_type(prop)} | {need} | {_bounds(prop)} | {desc} |")
    return "\n".join(rows)


def field_tables() -> str:
    """Markdown tables of every message and every part, generated from the models."""
    sections = ["### Messages", ""]
    sections += [_table(model) + "\n" for model in m.MESSAGE_TYPES.values()]
    sections += ["### Parts", ""]
    sections += [_table(model) + "\n" for model in _PARTS]
    return "\n".join(sections).rstrip() + "\n"


def render_protocol(text: str) -> str:
    """``text`` (docs/protocol.md) with its generated block replaced by :func:`field_tables`."""
    head, sep, rest = text.partition(_START)
    _, sep2, tail = rest.partition(_END)
    if not sep or not sep2:
        raise ValueError(f"docs/protocol.md lacks the {_START} ... {_END} markers")
    return f"{head}{_START}\n{field_tables()}{_END}{tail}"


def render() -> dict[str, str]:
    """File name -> JSON text of every schema, deterministic (sorted keys, trailing newline)."""
    return {
        f"{name}.schema.json": json.dumps(schema, indent=2, sort_keys=True) + "\n"
        for name, schema in m.json_schemas().items()
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
