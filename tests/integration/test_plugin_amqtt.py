"""The anonymizer as an amqtt broker plugin, loaded from the deploy/ YAML config."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import shapely
import yaml  # type: ignore[import-untyped]
from _svc_helpers import PROJ, make_config, running, seed_population

from locpriv.client import Client
from locpriv.errors import ErrorCode
from locpriv.service.broker import EmbeddedBroker
from locpriv.service.ds import DSService
from locpriv.transport import connect
from locpriv.wire.messages import ErrorReply, NearestQuery, decode
from locpriv.wire.topics import Topics

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

DEPLOY = Path(__file__).parents[2] / "deploy" / "amqtt-broker.yaml"
LON, LAT = PROJ.point_to_lonlat(-250.0, 400.0)


def _broker_config(tmp_path: Path, topics: Topics) -> dict[str, Any]:
    config: dict[str, Any] = yaml.safe_load(DEPLOY.read_text())
    toml = tmp_path / "locpriv.toml"
    toml.write_text(
        f'prefix = "{topics.prefix}"\n[cloak]\nepoch_s = 0.2\n[limits]\nds_timeout_s = 5.0\n'
    )
    plugin = config["plugins"]["locpriv.service.amqtt_plugin.AnonymizerPlugin"]
    plugin["config_file"] = str(toml)
    plugin.pop("prefix", None)
    return config


@pytest.mark.asyncio
async def test_amqtt_broker_with_plugin_serves_p3_and_p1(tmp_path: Path, topics: Topics) -> None:
    async with EmbeddedBroker(config=_broker_config(tmp_path, topics)) as broker:
        url = broker.url
        await seed_population(url, topics, n=30)
        async with Client(url, user_id="erin", prefix=topics.prefix) as erin:
            await erin.update_location(lat=LAT, lon=LON)
            cloak = await erin.cloak(k=4, a_min_m2=1e4, a_max_m2=5e7, max_delay_s=3)
            assert cloak.users is not None and cloak.users >= 4
            assert cloak.region.covers(shapely.Point(LON, LAT))
            assert 1e4 < cloak.area_m2 < 5e7
            # P1 through the plugin needs DS on the same broker
            async with running(DSService(url, make_config(topics))):
                query = NearestQuery(category="restaurant", n=2)
                p1 = await erin.query(query, protocol=1, k=4, a_min_m2=1e4, a_max_m2=5e7)
                exact = await erin.ds_query(query, lat=LAT, lon=LON)
                assert [p.id for p in p1.pois] == [p.id for p in exact]
        # malformed input gets an error reply and the plugin keeps going
        async with connect(url) as t:
            reply_to = topics.reply("probe")
            await t.subscribe(reply_to)
            bad = {"type": "cloak_request", "reply_to": reply_to, "correlation_id": "x", "v": 7}
            await t.publish(topics.p3_cloak("x"), json.dumps(bad).encode())
            async with asyncio.timeout(5):
                async for msg in t.messages():
                    if msg.topic != reply_to:  # amqtt may hand a new session retained messages
                        continue
                    err = decode(msg.payload)
                    assert isinstance(err, ErrorReply)
                    assert err.code == ErrorCode.UNSUPPORTED_VERSION and err.field == "v"
                    break
            # the plugin takes the identity from the topic too: naming erin on mallory's topic
            theft = {"type": "cloak_request", "reply_to": reply_to, "correlation_id": "y"}
            theft["user_id"] = "erin"
            await t.publish(topics.p3_cloak("mallory"), json.dumps(theft).encode())
            async with asyncio.timeout(5):
                async for msg in t.messages():
                    if msg.topic != reply_to:
                        continue
                    err = decode(msg.payload)
                    assert isinstance(err, ErrorReply) and err.correlation_id == "y"
                    assert err.code == ErrorCode.INVALID_FIELD and err.field == "user_id"
                    break


@pytest.mark.asyncio
async def test_the_plugin_binds_the_topic_to_the_login_itself(
    tmp_path: Path, topics: Topics
) -> None:
    """With password logins and no topic ACL plugin at all, the anonymizer plugin still drops a
    location or a request whose topic names another user than the session's login: it never
    reaches the core (deploy/amqtt-broker-auth.yaml has both)."""
    from _deploy import amqtt_password_line

    from locpriv.service.amqtt_plugin import AnonymizerPlugin
    from locpriv.wire.messages import CloakRequest, LocationUpdate, encode

    passwords = {"alice": "alice-pw", "mallory": "mallory-pw"}
    passwd = tmp_path / "amqtt.passwd"
    passwd.write_text("".join(amqtt_password_line(u, p) for u, p in passwords.items()))
    config = _broker_config(tmp_path, topics)
    plugin_conf = config["plugins"].pop("locpriv.service.amqtt_plugin.AnonymizerPlugin")
    plugin_conf["require_login"] = True
    config["plugins"] = {
        "amqtt.plugins.authentication.FileAuthPlugin": {"password_file": str(passwd)},
        "locpriv.service.amqtt_plugin.AnonymizerPlugin": plugin_conf,
    }
    async with EmbeddedBroker(config=config) as broker:
        plugins = broker.amqtt.plugins_manager.plugins
        (plugin,) = [p for p in plugins if isinstance(p, AnonymizerPlugin)]
        host = broker.url.removeprefix("mqtt://")
        async with connect(f"mqtt://mallory@{host}", password="mallory-pw") as t:
            update = LocationUpdate(user_id="alice", lat=LAT, lon=LON, t=0.0)
            await t.publish(topics.location("alice"), encode(update))
            request = CloakRequest(
                correlation_id="m1", reply_to=topics.reply(t.client_id), user_id="alice"
            )
            await t.publish(topics.p3_cloak("alice"), encode(request))
            own = LocationUpdate(user_id="mallory", lat=LAT, lon=LON, t=0.0)
            await t.publish(topics.location("mallory"), encode(own))
            async with asyncio.timeout(5):
                while plugin.stats["dropped_login"] < 2 or not plugin.core.users_per_tile():
                    await asyncio.sleep(0.02)
        assert plugin.stats["dropped_login"] == 2
        # mallory herself, never "alice"
        assert sum(plugin.core.users_per_tile().values()) == 1
