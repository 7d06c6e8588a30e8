"""Run the files in deploy/ as shipped against the real programs, for tests.

:func:`build` makes a CA and a server certificate for ``localhost`` (trustme), a password file
with the real ``mosquitto_passwd``, the shipped ACL, and the shipped ``mosquitto.conf`` with
only paths and ports changed (plus a log file for the test to read); :func:`unit_command` turns
a shipped systemd unit into the command and environment systemd would run, with paths
substituted. Nothing else of the shipped files changes: :func:`conf_directives` lets a test
check that.
"""

from __future__ import annotations

import functools
import os
import pwd
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trustme

from locpriv.client import Client
from locpriv.service.broker import MOSQUITTO_BIN, free_port

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
PASSWD_BIN = "/usr/bin/mosquitto_passwd"
USERS = ("alice", "bob", "carol", "dave", "erin", "fay", "gus", "mallory")
ANONYMIZER, DS = "locpriv-anonymizer", "locpriv-ds"
SERVICES = (ANONYMIZER, DS)


@dataclass
class Deployment:
    """Paths, ports and passwords of one test deployment."""

    root: Path
    plain_port: int
    tls_port: int
    passwords: dict[str, str]
    ca_file: Path
    conf: Path
    log: Path
    substitutions: dict[str, str] = field(default_factory=dict)

    def app_url(self, user: str | None, host: str = "localhost") -> str:
        """The TLS URL an app uses (user name only: the password is passed apart)."""
        who = f"{user}@" if user else ""
        return f"mqtts://{who}{host}:{self.tls_port}"

    def plain_url(self, user: str | None) -> str:
        """The localhost plain URL the services use."""
        who = f"{user}@" if user else ""
        return f"mqtt://{who}127.0.0.1:{self.plain_port}"


def conf_directives(text: str) -> list[tuple[str, str]]:
    """``(directive, value)`` of every non-comment line of a mosquitto config."""
    out = []
    for raw in text.splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition(" ")
            out.append((key, value.strip()))
    return out


def substitute(text: str, mapping: dict[str, str]) -> str:
    for old, new in sorted(mapping.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(old, new)
    return text


def build(root: Path) -> Deployment:
    """Certificates, users, ACL and mosquitto.conf for a deployment in a fresh directory under
    ``root``, which must be traversable by every user (``/tmp``): mosquitto started as root
    drops to the ``mosquitto`` user before it reads the password file, as on a server."""
    root = Path(tempfile.mkdtemp(prefix="locpriv-deploy-", dir=root))
    ca = trustme.CA()
    server = ca.issue_cert("localhost")  # no IP address: connecting to 127.0.0.1 must fail
    certs = root / "certs"
    certs.mkdir()
    server.cert_chain_pems[0].write_to_path(str(certs / "server.crt"))
    for extra in server.cert_chain_pems[1:]:
        extra.write_to_path(str(certs / "server.crt"), append=True)
    server.private_key_pem.write_to_path(str(certs / "server.key"))
    ca.cert_pem.write_to_path(str(certs / "ca.crt"))
    passwords = {name: secrets.token_urlsafe(18) for name in (*SERVICES, *USERS)}
    passwd = root / "locpriv.passwd"
    for i, (name, password) in enumerate(passwords.items()):
        # as the operator does it: the password typed at the prompt, not on the command line
        args = [PASSWD_BIN, *(["-c"] if i == 0 else []), str(passwd), name]
        subprocess.run(
            args, input=f"{password}\n{password}\n", text=True, check=True, capture_output=True
        )
    (root / "locpriv.acl").write_text((DEPLOY / "acl").read_text())
    plain, tls = free_port(), free_port()
    (root / "persist").mkdir()
    mapping = {
        "/etc/mosquitto/locpriv.passwd": str(passwd),
        "/etc/mosquitto/locpriv.acl": str(root / "locpriv.acl"),
        "/etc/mosquitto/certs/": f"{certs}/",
        "/var/lib/mosquitto/": f"{root / 'persist'}/",
        "listener 1883 127.0.0.1": f"listener {plain} 127.0.0.1",
        "listener 8883": f"listener {tls} 127.0.0.1",  # loopback only, for the test
    }
    log = root / "mosquitto.log"
    conf = root / "mosquitto.conf"
    shipped = (DEPLOY / "mosquitto.conf").read_text()
    conf.write_text(substitute(shipped, mapping) + f"\nlog_dest file {log}\n")
    log.touch()
    if os.geteuid() == 0:  # what mosquitto reads or writes belongs to its user, as on a server
        owner = pwd.getpwnam("mosquitto")
        for path in [root, *root.rglob("*")]:
            os.chown(path, owner.pw_uid, owner.pw_gid)
    return Deployment(root, plain, tls, passwords, certs / "ca.crt", conf, log, mapping)


def start_mosquitto(dep: Deployment) -> subprocess.Popen[bytes]:
    """mosquitto on the deployment's config; returns once both listeners accept."""
    proc = subprocess.Popen(
        [MOSQUITTO_BIN, "-c", str(dep.conf)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 10
    for port in (dep.plain_port, dep.tls_port):
        while True:
            if proc.poll() is not None:
                err = proc.stderr.read().decode() if proc.stderr else ""
                raise RuntimeError(f"mosquitto exited: {err}\n{dep.log.read_text()}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
    return proc


def unit_service(name: str) -> dict[str, list[str]]:
    """The ``[Service]`` settings of ``deploy/systemd/<name>`` (each key may repeat)."""
    settings: dict[str, list[str]] = {}
    section = ""
    for raw in (DEPLOY / "systemd" / name).read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            section = line
            continue
        if section == "[Service]":
            key, _, value = line.partition("=")
            settings.setdefault(key, []).append(value)
    return settings


def read_env_file(path: Path) -> dict[str, str]:
    """A systemd ``EnvironmentFile`` (``KEY=value`` lines)."""
    env = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            env[key] = value
    return env


def load_credentials(name: str) -> dict[str, str]:
    """``LoadCredential=id:source`` lines of ``deploy/systemd/<name>``: id -> shipped source."""
    out = {}
    for spec in unit_service(name).get("LoadCredential", []):
        cred_id, _, source = spec.partition(":")
        out[cred_id] = source
    return out


def unit_command(
    name: str,
    paths: dict[str, str],
    credentials: dict[str, str],
    creds_dir: Path,
    *,
    instance: str = "",
) -> tuple[list[str], dict[str, str]]:
    """The command line and environment systemd would start ``name`` with.

    ``paths`` maps shipped paths to test paths (applied to the unit and to its env files, which
    are read from ``deploy/systemd/<basename>``). The credentials directory is made as systemd
    does: ``creds_dir`` (mode 0700, fresh) holds one read-only file per ``LoadCredential`` line
    of the unit and nothing else, copied from the line's source file (path substituted) or
    taken from ``credentials`` (id -> content, e.g. the password of the login the test runs the
    unit as); a missing source fails, as it fails the unit's start.
    ``CREDENTIALS_DIRECTORY`` names it. ``Environment=`` lines apply below the env files;
    ``CacheDirectory=`` is :data:`CACHE_ROOT` (made 0700) and the environment points there. A
    unit with ``ProtectSystem=strict`` runs with the install read-only and no home to write
    in, wherever :func:`read_only_install` works. ``instance`` is a template unit's ``%i``
    (``name`` is then ``unit@.service``).
    """
    settings = {
        key: [v.replace("%i", instance) for v in values]
        for key, values in unit_service(name).items()
    }
    env: dict[str, str] = {}
    for line in settings.get("Environment", []):  # EnvironmentFile= lines override these
        key, _, value = line.partition("=")
        env[key] = substitute(value, paths)
    for cache in settings.get("CacheDirectory", []):  # made by systemd, owned by the unit
        CACHE_ROOT.mkdir(parents=True, exist_ok=True, mode=0o700)
        env = {k: v.replace(f"/var/cache/{cache}", str(CACHE_ROOT)) for k, v in env.items()}
    for env_file in settings.get("EnvironmentFile", []):
        shipped = DEPLOY / "systemd" / Path(env_file).name
        env.update({k: substitute(v, paths) for k, v in read_env_file(shipped).items()})
    shutil.rmtree(creds_dir, ignore_errors=True)
    creds_dir.mkdir(parents=True, mode=0o700)
    for cred_id, source in load_credentials(name).items():
        if cred_id in credentials:
            content = (credentials[cred_id] + "\n").encode()
        else:
            content = Path(substitute(source, paths)).read_bytes()
        target = creds_dir / cred_id
        target.write_bytes(content)
        target.chmod(0o400)
    env["CREDENTIALS_DIRECTORY"] = str(creds_dir)
    (exec_start,) = settings["ExecStart"]
    words = shlex.split(substitute(exec_start, paths))
    expanded = [re.sub(r"\$\{(\w+)\}", lambda m: env[m.group(1)], w) for w in words]
    if settings.get("ProtectSystem") == ["strict"] and read_only_install():
        expanded = [*_UNSHARE, "sh", "-c", _read_only_script(), "sh", *expanded]
        env["HOME"] = str(ROOT / ".no-home")  # ProtectHome: no home to write a cache in
    return expanded, env


CACHE_ROOT = Path(tempfile.gettempdir()) / f"locpriv-test-numba-cache-{os.getuid()}"
"""Where every unit's ``CacheDirectory=`` (``/var/cache/NAME``) lies for tests: one for the
machine's login (the tests run every unit as it), so that numba compiles the services'
kernels once, not in every deployment nor once per unit."""

_UNSHARE = ["unshare", "--mount"] + ([] if os.geteuid() == 0 else ["--map-root-user"])


def _read_only_script() -> str:
    """Shell lines that make the install read-only (the checkout, the venv, the interpreter)
    in the unit's own mount namespace, then run the unit's command (``"$@"``)."""
    tops: list[str] = []
    for path in sorted({str(ROOT), sys.prefix, sys.base_prefix}):
        if not any(path.startswith(top + "/") for top in tops):
            tops.append(path)
    mounts = [
        f"mount --bind {shlex.quote(t)} {shlex.quote(t)} && "
        f"mount -o remount,bind,ro {shlex.quote(t)}"
        for t in tops
    ]
    return " && ".join([*mounts, 'exec "$@"'])


@functools.cache
def read_only_install() -> bool:
    """Whether units run as under ``ProtectSystem=strict``: their install read-only (a mount
    namespace, ``unshare``, which needs root or unprivileged user namespaces). Units started
    by :func:`unit_command` get it wherever it works; a test that needs it checks this."""
    probe = [*_UNSHARE, "sh", "-c", _read_only_script(), "sh", "test", "!", "-w", str(ROOT)]
    try:
        done = subprocess.run(probe, check=False, capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def locpriv_paths(dep: Deployment) -> dict[str, str]:
    """Shipped service paths -> this deployment's (the venv, /etc/locpriv, /var/lib/locpriv)."""
    etc = dep.root / "etc-locpriv"
    var = dep.root / "var-lib-locpriv"
    etc.mkdir(exist_ok=True)
    var.mkdir(exist_ok=True)
    for key in ("token.key", "answer.key"):  # root-only, as the install steps make them
        (etc / key).write_text(secrets.token_hex(32) + "\n")
        (etc / key).chmod(0o600)
    paths = {
        "/opt/locpriv/venv/bin/": f"{Path(sys.executable).parent}/",
        "/etc/locpriv/": f"{etc}/",
        "/var/lib/locpriv-ds/pois.csv": str(ROOT / "locpriv" / "data" / "pois.csv"),
        "/var/lib/locpriv/": f"{var}/",
        "127.0.0.1:1883": f"127.0.0.1:{dep.plain_port}",
    }
    toml = substitute((DEPLOY / "locpriv.toml").read_text(), paths)
    (etc / "locpriv.toml").write_text(toml)
    return paths


def service_env(extra: dict[str, str]) -> dict[str, str]:
    """The test process's environment (PATH, HOME, ...) with a unit's environment on top."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("LOCPRIV_", "NUMBA_CACHE_DIR", "XDG_CACHE_HOME"))
    }
    env.update(extra)
    return env


def start_unit(
    dep: Deployment,
    unit: str,
    user: str,
    paths: dict[str, str],
    *,
    name: str = "",
    instance: str = "",
    env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """Start ``unit`` (instance ``instance`` of a template) as systemd would, logged in as
    ``user`` with her password credential; output in ``{name}.out``/``.err`` under the
    deployment's root (``name`` defaults to ``user``); returns once it prints ``serving``."""
    name = name or user
    argv, unit_env = unit_command(
        unit,
        paths,
        {"broker-password": dep.passwords[user]},
        dep.root / f"creds-{name}",
        instance=instance,
    )
    out_path = dep.root / f"{name}.out"
    with out_path.open("wb") as out, out_path.with_suffix(".err").open("wb") as err:
        proc = subprocess.Popen(
            argv, env=service_env({**unit_env, **(env or {})}), stdout=out, stderr=err
        )
    deadline = time.monotonic() + 60
    while b"serving " not in out_path.read_bytes():
        if proc.poll() is not None or time.monotonic() > deadline:
            tail = out_path.with_suffix(".err").read_text(errors="replace")[-3000:]
            raise AssertionError(f"{name}: not serving (exit {proc.poll()}): {tail}")
        time.sleep(0.05)
    return proc


def stop_deployment(
    dep: Deployment, procs: Iterable[subprocess.Popen[bytes]], broker: subprocess.Popen[bytes]
) -> None:
    """SIGTERM the services (SIGKILL after 20 s), stop mosquitto, remove the deployment."""
    procs = list(procs)
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    broker.terminate()
    broker.wait(10)
    if broker.stderr is not None:
        broker.stderr.close()
    shutil.rmtree(dep.root, ignore_errors=True)


def app(dep: Deployment, user: str, **kw: Any) -> Client:
    """An app of ``user`` over TLS with her password, as an operator's user would run it."""
    kw.setdefault("timeout_s", 8.0)
    return Client(
        dep.app_url(user),
        user_id=user,
        password=dep.passwords[user],
        ca_file=str(dep.ca_file),
        **kw,
    )


_CONNECTED = re.compile(r"New client connected from \S+ as (\S+) \(.*u'([^']+)'\)")


def service_ids(dep: Deployment) -> dict[str, str]:
    """The client id each service login connected with, read from the broker's log (where an
    operator sees them; what a leak of that log would give away)."""
    ids = {}
    for line in dep.log.read_text().splitlines():
        m = _CONNECTED.search(line)
        if m and m.group(2) in SERVICES:
            ids.setdefault(m.group(2), m.group(1))
    return ids


AMQTT_CREDENTIALS = "/run/credentials/locpriv-amqtt.service/"
"""Where systemd puts locpriv-amqtt.service's credentials (amqtt-broker-auth.yaml names it)."""
AMQTT_USERS = (DS, *USERS)
"""Logins of the broker-plugin deployment: DS and the apps (the anonymizer is the plugin)."""


def amqtt_password_line(user: str, password: str) -> str:
    """``user:hash`` for amqtt's FileAuthPlugin (argon2, pwdlib), as docs/operations.md has the
    operator make it (the password typed at a prompt there)."""
    from pwdlib import PasswordHash
    from pwdlib.hashers.argon2 import Argon2Hasher

    return f"{user}:{PasswordHash((Argon2Hasher(),)).hash(password)}\n"


def build_amqtt(root: Path) -> tuple[Deployment, dict[str, str]]:
    """The broker-plugin deployment (deploy/amqtt-broker-auth.yaml) in a fresh directory:
    certificates, the argon2 password file, locpriv.toml and token key, the YAML with only paths
    and ports changed. Returns the deployment and the shipped -> test path mapping."""
    root = Path(tempfile.mkdtemp(prefix="locpriv-amqtt-", dir=root))
    ca = trustme.CA()
    server = ca.issue_cert("localhost")
    etc = root / "etc-locpriv"
    (etc / "certs").mkdir(parents=True)
    server.cert_chain_pems[0].write_to_path(str(etc / "certs" / "server.crt"))
    for extra in server.cert_chain_pems[1:]:
        extra.write_to_path(str(etc / "certs" / "server.crt"), append=True)
    server.private_key_pem.write_to_path(str(etc / "certs" / "server.key"))
    ca.cert_pem.write_to_path(str(root / "ca.crt"))
    passwords = {name: secrets.token_urlsafe(18) for name in AMQTT_USERS}
    (etc / "amqtt.passwd").write_text(
        "".join(amqtt_password_line(u, p) for u, p in passwords.items())
    )
    for secret in (etc / "certs" / "server.key", etc / "amqtt.passwd"):
        secret.chmod(0o600)  # root-only: the unit reads them as credentials
    plain, tls = free_port(), free_port()
    dep = Deployment(
        root, plain, tls, passwords, root / "ca.crt", etc / "amqtt-broker-auth.yaml", root / "x"
    )
    paths = locpriv_paths(dep)  # locpriv.toml, token.key, venv, 127.0.0.1:1883 -> plain
    paths[AMQTT_CREDENTIALS] = f"{root / 'creds-amqtt'}/"
    yaml_paths = {
        **paths,
        "bind: 127.0.0.1:1883": f"bind: 127.0.0.1:{plain}",
        "bind: 0.0.0.0:8883": f"bind: 127.0.0.1:{tls}",  # loopback only, for the test
    }
    shipped = (DEPLOY / "amqtt-broker-auth.yaml").read_text()
    dep.conf.write_text(substitute(shipped, yaml_paths))
    dep.substitutions = yaml_paths
    return dep, paths


def start_amqtt_unit(dep: Deployment, paths: dict[str, str]) -> subprocess.Popen[bytes]:
    """deploy/systemd/locpriv-amqtt.service's command on the deployment's YAML, with the unit's
    credentials directory (where the YAML reads the TLS key and the login file); returns once
    the TLS listener accepts connections."""
    creds = Path(paths[AMQTT_CREDENTIALS])
    argv, unit_env = unit_command("locpriv-amqtt.service", paths, {}, creds)
    assert argv[-1] == str(dep.conf), argv
    with (dep.root / "amqtt.out").open("wb") as out:
        proc = subprocess.Popen(
            argv, env=service_env(unit_env), stdout=out, stderr=subprocess.STDOUT
        )
    deadline = time.monotonic() + 60
    for port in (dep.plain_port, dep.tls_port):
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = (dep.root / "amqtt.out").read_text(errors="replace")[-3000:]
                raise AssertionError(f"amqtt not listening (exit {proc.poll()}): {tail}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                time.sleep(0.1)
    return proc
