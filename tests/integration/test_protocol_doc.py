"""The example session in docs/protocol.md, run as written with mosquitto's own clients."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
from pathlib import Path

import pytest
from _svc_helpers import make_config, running

from locpriv.service.anonymizer import AnonymizerService
from locpriv.service.ds import DSService
from locpriv.wire.topics import Topics

pytestmark = [pytest.mark.integration, pytest.mark.mosquitto, pytest.mark.timeout(90)]

DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"


def _session() -> str:
    text = DOC.read_text(encoding="utf-8")
    block = re.search(r"<!-- session:start -->\n```sh\n(.*?)```\n<!-- session:end -->", text, re.S)
    assert block is not None, "docs/protocol.md lost its example session"
    return block.group(1)


@pytest.mark.asyncio
async def test_documented_session_runs(mosquitto_url: str, topics: Topics, tmp_path: Path) -> None:
    for tool in ("mosquitto_pub", "mosquitto_sub"):
        if shutil.which(tool) is None:
            message = f"{tool} not found (apt-get install mosquitto-clients)"
            if os.environ.get("CI"):
                pytest.fail(message)
            pytest.skip(message)
    script = _session()
    host, port = mosquitto_url.removeprefix("mqtt://").split(":")
    script = script.replace("H=127.0.0.1 P=1883 T=locpriv/v1", f"H={host} P={port} T={topics.root}")
    config = make_config(topics)
    async with running(AnonymizerService(mosquitto_url, config), DSService(mosquitto_url, config)):
        proc = await asyncio.create_subprocess_exec(
            "bash",
            "-euo",
            "pipefail",
            "-c",
            script,
            cwd=tmp_path,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    replies = [json.loads(line) for line in out.decode().splitlines() if line.strip()]
    by_cid = {r["correlation_id"]: r for r in replies}
    assert by_cid["c1"]["type"] == "cloak_reply" and by_cid["c1"]["users"] >= 3
    assert by_cid["d1"]["type"] == "query_answer" and by_cid["d1"]["candidates"] is True
    assert by_cid["q1"]["type"] == "query_answer" and len(by_cid["q1"]["pois"]) == 1
    assert by_cid["q1"]["pois"][0]["id"] in {p["id"] for p in by_cid["d1"]["pois"]}
