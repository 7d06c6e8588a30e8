"""``credential:NAME`` key files: resolved in ``$CREDENTIALS_DIRECTORY`` only, refused clearly."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from locpriv.config import ServiceConfig, load_config
from locpriv.credentials import secret_path
from locpriv.errors import ConfigError
from locpriv.protocols.seal import AnswerMac, Sealer
from locpriv.protocols.trusted import build_trusted_core


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "locpriv.toml"
    path.write_text(
        '[state]\ntoken_key_file = "credential:token-key"\n'
        'answer_key_file = "credential:answer-key"\n'
    )
    return path


def test_a_credential_is_the_file_in_the_services_credentials_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    creds = tmp_path / "creds"
    creds.mkdir()
    token, answer = secrets.token_hex(32), secrets.token_hex(32)
    (creds / "token-key").write_text(token + "\n")
    (creds / "answer-key").write_text(answer + "\n")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(creds))
    config = load_config(str(_config(tmp_path)))
    assert secret_path(config.state.token_key_file, "token key") == creds / "token-key"
    sealed = Sealer.from_config(config.state.token_key_file)
    assert not sealed.ephemeral
    assert Sealer(bytes.fromhex(token)).open(sealed.seal({"a": 1})) == {"a": 1}
    mac = AnswerMac.from_config(config.state.answer_key_file)
    assert mac is not None and mac._key == bytes.fromhex(answer)
    core = build_trusted_core(config, "locpriv/v1/svc/reply/x")
    assert core.mediator.answer_mac is not None


def test_a_service_not_given_the_credential_refuses_to_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = load_config(str(_config(tmp_path)))
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)
    with pytest.raises(ConfigError, match="CREDENTIALS_DIRECTORY is not set"):
        build_trusted_core(config, "locpriv/v1/svc/reply/x")
    # DS's directory: the answer key only; a key file of the same name elsewhere is not used
    creds = tmp_path / "ds-creds"
    creds.mkdir()
    (creds / "answer-key").write_text(secrets.token_hex(32))
    (tmp_path / "token-key").write_text(secrets.token_hex(32))
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(creds))
    monkeypatch.chdir(tmp_path)
    assert AnswerMac.from_config(config.state.answer_key_file) is not None
    with pytest.raises(ConfigError, match="'token-key', which this service was not given") as e:
        Sealer.from_config(config.state.token_key_file)
    assert str(tmp_path / "token-key") not in str(e.value)


@pytest.mark.parametrize(
    "value", ["credential:", "credential:../token.key", "credential:/etc/x", "credential:a/b"]
)
def test_a_credential_name_cannot_leave_the_directory(value: str) -> None:
    with pytest.raises(ValueError, match="credential name"):
        ServiceConfig.model_validate({"state": {"token_key_file": value}})


def test_a_path_is_still_a_path(tmp_path: Path) -> None:
    key = tmp_path / "token.key"
    key.write_text(secrets.token_hex(32))
    assert not Sealer.from_config(str(key)).ephemeral
    assert secret_path(str(key), "token key") == key
