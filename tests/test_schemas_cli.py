"""Committed JSON Schemas equal the models; the CLI lists its commands."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from locpriv.cli import main
from locpriv.wire import schemas

ROOT = Path(__file__).resolve().parents[1]


def test_committed_schemas_match_models() -> None:
    problems = schemas.diff(ROOT / "docs" / "schemas")
    assert problems == [], f"run `locpriv schemas` and commit docs/schemas: {problems}"


def test_schema_check_detects_drift(tmp_path: Path) -> None:
    schemas.export(tmp_path)
    assert schemas.diff(tmp_path) == []
    (tmp_path / "error.schema.json").write_text("{}\n")
    (tmp_path / "stale.schema.json").write_text("{}\n")
    assert schemas.diff(tmp_path) == ["error.schema.json", "stale.schema.json"]
    assert main(["schemas", "--check", "--out", str(tmp_path)]) == 1
    assert main(["schemas", "--out", str(tmp_path)]) == 0
    assert main(["schemas", "--check", "--out", str(tmp_path)]) == 0


def test_help_lists_commands() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "locpriv", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for name in ("schemas", "anonymize", "serve", "demo"):  # what README.md documents
        assert f"    {name} " in out


def test_protocol_page_lists_every_field_of_the_models() -> None:
    doc = ROOT / "docs" / "protocol.md"
    text = doc.read_text(encoding="utf-8")
    assert schemas.render_protocol(text) == text, (
        "run `locpriv schemas` and commit docs/protocol.md"
    )
    for name, model in (("correlation_id", "CloakRequest"), ("radius_m", "WithinQuery")):
        assert f"#### `{model}`" in text and f"| `{name}` |" in text
