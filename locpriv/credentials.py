"""Where a secret file named in the configuration lies: a path, or a systemd credential.

A ``[state]`` key file given as ``credential:NAME`` is the file ``NAME`` in the directory
systemd hands a service its ``LoadCredential=`` copies in (``$CREDENTIALS_DIRECTORY``, readable
by that service only). One ``locpriv.toml`` then serves every unit while each unit can read only
the secrets its own ``LoadCredential=`` lines give it: DS, given no ``token-key`` credential,
has no token key, whatever the configuration names. The secret itself never travels in the
environment or on the command line; only the directory's path does.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Final

from locpriv.errors import ConfigError

__all__ = ["CREDENTIALS_ENV", "CREDENTIAL_PREFIX", "credential_name", "secret_path"]

CREDENTIAL_PREFIX: Final = "credential:"
CREDENTIALS_ENV: Final = "CREDENTIALS_DIRECTORY"
_NAME: Final = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")


def credential_name(value: str) -> str | None:
    """``NAME`` of a ``credential:NAME`` value, None for a path; raises ConfigError for a
    name systemd would not accept (empty, ``/``, ``..``)."""
    if not value.startswith(CREDENTIAL_PREFIX):
        return None
    name = value[len(CREDENTIAL_PREFIX) :]
    if not _NAME.match(name) or ".." in name:
        raise ConfigError(
            f"{value!r}: a credential name is 1-128 of A-Z a-z 0-9 _ . - (no '/', no '..')"
        )
    return name


def secret_path(value: str, what: str) -> Path:
    """The file ``value`` names: a path as is, or ``credential:NAME`` resolved against
    ``$CREDENTIALS_DIRECTORY``. Raises ConfigError (naming the credential, never a secret)
    when the variable is not set or the service was given no such credential."""
    name = credential_name(value)
    if name is None:
        return Path(value)
    directory = os.environ.get(CREDENTIALS_ENV, "")
    if not directory:
        raise ConfigError(
            f"the {what} is the systemd credential {name!r} but {CREDENTIALS_ENV} is not set:"
            f" run the service with LoadCredential={name}:<file> or give the file's path"
        )
    path = Path(directory) / name
    if not path.is_file():
        raise ConfigError(
            f"the {what} is the systemd credential {name!r}, which this service was not given"
            f" (no {name} in {CREDENTIALS_ENV}): add LoadCredential={name}:<file> to its unit"
        )
    return path
