"""``locpriv serve`` processes killed with SIGKILL lose no accepted request silently, and a
service whose publishing is wedged exits non-zero so that its supervisor restarts it."""

from __future__ import annotations

import asyncio
import json
import secrets
import signal
from pathlib import Path

import pytest
from _svc_helpers import PROJ, Spy, make_config, running, seed_population, serve_process

from locpriv.client import Client
from locpriv.errors import ErrorCode, RemoteError
from locpriv.service.broker import MosquittoProcess
from locpriv.service.ds import DSService
from locpriv.transport import connect
from locpriv.wire.messages import DSQuery, NearestQuery, PointLocation, WithinQuery, decode, encode
from locpriv.wire.topics import Topics

pytestmark = [pytest.mark.integration, pytest.mark.mosquitto, pytest.mark.timeout(180)]

LON, LAT = PROJ.point_to_lonlat(150.0, 80.0)


def _config_file(tmp_path: Path, topics: Topics, **state: str) -> Path:
    lines = [
        f'prefix = "{topics.prefix}"',
        "[cloak]",
        "epoch_s = 0.2",
        "[limits]",
        "ds_timeout_s = 60.0",
        "[mqtt]",
        f'client_id = "{topics.prefix}-anon"',
        f'ds_client_id = "{topics.prefix}-ds"',
        "backoff_max_s = 0.5",
        "[state]",
        *(f'{k} = "{v}"' for k, v in state.items()),
    ]
    path = tmp_path / "locpriv.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


async def _kill9(proc: asyncio.subprocess.Process) -> None:
    proc.send_signal(signal.SIGKILL)
    await proc.wait()


@pytest.mark.asyncio
async def test_ds_answer_relayed_by_the_restarted_anonymizer(
    mosquitto: MosquittoProcess, topics: Topics, tmp_path: Path
) -> None:
    """A P2 request waits on DS; the anonymizer is killed; a new one (same key) relays the
    answer DS gives later, from the sealed token alone."""
    url = mosquitto.url
    key = tmp_path / "token.key"
    key.write_text(secrets.token_hex(32))
    config = _config_file(tmp_path, topics, token_key_file=str(key))
    ds = DSService(url, make_config(topics))
    async with running(ds):
        pass  # DS's persistent session now queues the DS queries while DS is away
    async with (
        Spy(url, topics.svc_ds_query) as spy,
        Client(url, user_id="ann", prefix=topics.prefix, timeout_s=90) as ann,
    ):
        async with serve_process(url, "anonymizer", config) as first:
            pending = asyncio.create_task(
                ann.query(NearestQuery(category="cafe", n=3), protocol=2, lat=LAT, lon=LON)
            )
            await spy.wait_for(1, timeout=20)  # forwarded to DS, which is not running
            await _kill9(first)
        forwarded = decode(spy.seen[0].payload)
        assert isinstance(forwarded, DSQuery)
        assert "ann" not in forwarded.correlation_id and "ann" not in encode(forwarded).decode()
        async with (
            serve_process(url, "anonymizer", config),
            running(DSService(url, make_config(topics))),
        ):
            answer = await asyncio.wait_for(pending, 60)
    exact = [p.id for p in ds.index.nearest_xy(150.0, 80.0, "cafe", 3)]
    assert [p.id for p in answer.pois] == exact


@pytest.mark.asyncio
async def test_pending_temporal_cloak_answered_unavailable_after_a_crash(
    mosquitto: MosquittoProcess, topics: Topics, tmp_path: Path
) -> None:
    url = mosquitto.url
    journal = tmp_path / "state" / "pending.json"
    config = _config_file(tmp_path, topics, journal_file=str(journal))
    async with Client(url, user_id="bea", prefix=topics.prefix, timeout_s=90) as bea:
        async with serve_process(url, "anonymizer", config) as first:
            await seed_population(url, topics, n=3)
            waiting = asyncio.create_task(
                bea.cloak(k=40, a_min_m2=1e4, a_max_m2=5e7, max_delay_s=50, lat=LAT, lon=LON)
            )
            async with asyncio.timeout(20):  # journaled within a watchdog period
                while not journal.exists() or not json.loads(journal.read_text()):
                    await asyncio.sleep(0.1)
            await _kill9(first)
        assert not waiting.done()
        # DS reads the same configuration file: the journal is not its to answer or clear
        async with serve_process(url, "ds", config):
            await asyncio.sleep(1.5)  # past DS's first watchdog period, when it would write
            assert json.loads(journal.read_text()) and not waiting.done()
        loop = asyncio.get_running_loop()
        async with serve_process(url, "anonymizer", config):
            t0 = loop.time()
            with pytest.raises(RemoteError) as info:
                await asyncio.wait_for(waiting, 30)
            assert loop.time() - t0 < 10
    assert info.value.code == ErrorCode.UNAVAILABLE
    assert "restarted" in info.value.reason
    assert not journal.exists() or json.loads(journal.read_text()) == []


@pytest.mark.asyncio
async def test_wedged_publisher_exits_non_zero(topics: Topics, tmp_path: Path) -> None:
    """An answer the broker refuses (over its packet limit) used to be re-sent after every
    reconnect, for ever, by a process that stayed alive. Now the service gives up and exits
    with a non-zero status, which ``Restart=on-failure`` acts on."""
    mosquitto = MosquittoProcess(str(tmp_path), extra_config="max_packet_size 4096\n")
    mosquitto.start()
    try:
        config = _config_file(tmp_path, topics)
        async with serve_process(mosquitto.url, "ds", config) as proc:
            async with connect(mosquitto.url) as t:
                big = DSQuery(
                    correlation_id="big",
                    reply_to=topics.reply("x"),
                    query=WithinQuery(radius_m=5000),
                    location=PointLocation(lat=LAT, lon=LON),
                )
                await t.publish(topics.ds_query, encode(big))
            async with asyncio.timeout(150):
                code = await proc.wait()
            assert proc.stderr is not None
            err = (await proc.stderr.read()).decode()
        assert code != 0
        assert "ds failed" in err and "Bad file descriptor" not in err
    finally:
        mosquitto.stop()
